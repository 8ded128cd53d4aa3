// A small SVG line chart: stacked panels sharing an x axis (the step), one
// polyline per series, optional horizontal reference lines (a budget). Used
// by the end-to-end benchmark to draw step time and peak memory per step.
#ifndef REMAT_BENCH_SVG_CHART_H_
#define REMAT_BENCH_SVG_CHART_H_

#include <string>
#include <vector>

namespace remat {

struct Series {
  std::string name;
  std::vector<double> y;  // one value per step
};

struct Panel {
  std::string title;   // e.g. "peak memory (MiB)"
  std::vector<Series> series;
  std::vector<std::pair<std::string, double>> hlines;  // label, y
};

// Renders the panels stacked vertically; series i gets colour i in every
// panel, so one legend serves all.
std::string RenderSvg(const std::string& title,
                      const std::vector<Panel>& panels);

}  // namespace remat

#endif  // REMAT_BENCH_SVG_CHART_H_
