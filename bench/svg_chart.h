// A small SVG line chart: stacked panels sharing an x axis (the step, or
// labelled positions), one polyline per series with optionally marked
// points, optional horizontal reference lines (a budget). Used by the
// end-to-end benchmark (step time and peak memory per step) and the budget
// sweep (throughput against budget).
#ifndef REMAT_BENCH_SVG_CHART_H_
#define REMAT_BENCH_SVG_CHART_H_

#include <string>
#include <vector>

namespace remat {

struct Series {
  std::string name;
  std::vector<double> y;  // one value per x position (a step)
  // Points drawn with a cross (e.g. over budget); empty: none.
  std::vector<bool> marked;
};

struct Panel {
  std::string title;   // e.g. "peak memory (MiB)"
  std::vector<Series> series;
  std::vector<std::pair<std::string, double>> hlines;  // label, y
  std::string x_label = "step";
  // Labels under the x positions (e.g. budgets); empty: none.
  std::vector<std::string> x_ticks;
};

// Renders the panels stacked vertically; series i gets colour i in every
// panel, so one legend serves all.
std::string RenderSvg(const std::string& title,
                      const std::vector<Panel>& panels);

}  // namespace remat

#endif  // REMAT_BENCH_SVG_CHART_H_
