#include "bench/svg_chart.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace remat {
namespace {

constexpr double kWidth = 900;
constexpr double kPanelHeight = 260;
constexpr double kLeft = 70, kRight = 170, kTop = 40, kGap = 50;
const char* const kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

}  // namespace

std::string RenderSvg(const std::string& title,
                      const std::vector<Panel>& panels) {
  const double plot_w = kWidth - kLeft - kRight;
  const double height = kTop + panels.size() * (kPanelHeight + kGap);
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth
      << "\" height=\"" << height << "\" font-family=\"sans-serif\" "
      << "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
      << "fill=\"white\"/>\n<text x=\"" << kLeft << "\" y=\"22\" "
      << "font-size=\"16\">" << Escape(title) << "</text>\n";
  for (size_t p = 0; p < panels.size(); ++p) {
    const Panel& panel = panels[p];
    const double top = kTop + p * (kPanelHeight + kGap) + 20;
    const double h = kPanelHeight - 20;
    size_t steps = 1;
    double y_max = 0;
    for (const Series& s : panel.series) {
      steps = std::max(steps, s.y.size());
      for (double v : s.y) y_max = std::max(y_max, v);
    }
    for (const auto& [label, y] : panel.hlines) y_max = std::max(y_max, y);
    y_max = y_max > 0 ? y_max * 1.08 : 1;
    auto X = [&](size_t i) {
      return kLeft + plot_w * (steps > 1 ? double(i) / (steps - 1) : 0);
    };
    auto Y = [&](double v) { return top + h - h * v / y_max; };

    svg << "<text x=\"" << kLeft << "\" y=\"" << top - 6 << "\">"
        << Escape(panel.title) << "</text>\n";
    svg << "<rect x=\"" << kLeft << "\" y=\"" << top << "\" width=\""
        << plot_w << "\" height=\"" << h
        << "\" fill=\"none\" stroke=\"#888\"/>\n";
    for (int t = 0; t <= 4; ++t) {
      const double v = y_max * t / 4;
      svg << "<text x=\"" << kLeft - 6 << "\" y=\"" << Num(Y(v) + 4)
          << "\" text-anchor=\"end\">" << Num(v) << "</text>\n";
    }
    for (size_t i = 0; i < panel.x_ticks.size(); ++i) {
      svg << "<text x=\"" << Num(X(i)) << "\" y=\"" << top + h + 14
          << "\" text-anchor=\"middle\">" << Escape(panel.x_ticks[i])
          << "</text>\n";
    }
    svg << "<text x=\"" << kLeft + plot_w / 2 << "\" y=\""
        << top + h + (panel.x_ticks.empty() ? 16 : 30)
        << "\" text-anchor=\"middle\">" << Escape(panel.x_label)
        << "</text>\n";
    for (size_t s = 0; s < panel.series.size(); ++s) {
      const Series& series = panel.series[s];
      svg << "<polyline fill=\"none\" stroke-width=\"1.2\" stroke=\""
          << kColours[s % 8] << "\" points=\"";
      for (size_t i = 0; i < series.y.size(); ++i) {
        svg << Num(X(i)) << "," << Num(Y(series.y[i])) << " ";
      }
      svg << "\"/>\n";
      for (size_t i = 0; i < series.marked.size() && i < series.y.size(); ++i) {
        if (!series.marked[i]) continue;
        const double x = X(i), y = Y(series.y[i]);
        svg << "<path d=\"M" << Num(x - 4) << "," << Num(y - 4) << " L"
            << Num(x + 4) << "," << Num(y + 4) << " M" << Num(x - 4) << ","
            << Num(y + 4) << " L" << Num(x + 4) << "," << Num(y - 4)
            << "\" stroke=\"" << kColours[s % 8]
            << "\" stroke-width=\"2\"/>\n";
      }
      svg << "<text x=\"" << kLeft + plot_w + 10 << "\" y=\""
          << top + 14 + 16 * s << "\" fill=\"" << kColours[s % 8] << "\">"
          << Escape(series.name) << "</text>\n";
    }
    for (const auto& [label, y] : panel.hlines) {
      svg << "<line x1=\"" << kLeft << "\" x2=\"" << kLeft + plot_w
          << "\" y1=\"" << Num(Y(y)) << "\" y2=\"" << Num(Y(y))
          << "\" stroke=\"black\" stroke-dasharray=\"6,4\"/>\n"
          << "<text x=\"" << kLeft + plot_w + 10 << "\" y=\"" << Num(Y(y) + 4)
          << "\">" << Escape(label) << "</text>\n";
    }
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace remat
