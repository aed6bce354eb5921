#include "recipes/runner/plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "bert/common/strings.h"

namespace bert::recipes {
namespace {

using json = nlohmann::json;

constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                   "#9467bd", "#8c564b", "#e377c2", "#17becf"};

struct Panel {
  double x0, y0, w, h;            // pixel box of the plotting area
  double xmin, xmax, ymin, ymax;  // data range
  double px(double x) const { return x0 + (xmax > xmin ? (x - xmin) / (xmax - xmin) : 0.5) * w; }
  double py(double y) const {
    return y0 + h - (ymax > ymin ? (y - ymin) / (ymax - ymin) : 0.5) * h;
  }
};

/// `text` as SVG (XML) character data: a sweep value may hold '<' or '&'.
std::string xml_text(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else
      out += c;
  }
  return out;
}

std::string value_of(const json& hyperparameters, const std::string& key) {
  for (const auto& kv : hyperparameters)
    if (kv[0] == key) return kv[1];
  return "";
}

std::string axes(const Panel& p,
                 const std::string& title,
                 const std::string& xlabel,
                 const std::string& ylabel,
                 const std::vector<std::pair<double, std::string>>& xticks) {
  std::string out =
      fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#888"/>)", p.x0,
                  p.y0, p.w, p.h);
  out += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle" font-size="14">{}</text>)",
                     p.x0 + p.w / 2, p.y0 - 10, title);
  out += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle" font-size="12">{}</text>)",
                     p.x0 + p.w / 2, p.y0 + p.h + 36, xlabel);
  out += fmt::format(
      R"svg(<text x="{}" y="{}" text-anchor="middle" font-size="12" transform="rotate(-90 {} {})">{}</text>)svg",
      p.x0 - 46, p.y0 + p.h / 2, p.x0 - 46, p.y0 + p.h / 2, ylabel);
  for (int i = 0; i <= 4; ++i) {
    const double y = p.ymin + (p.ymax - p.ymin) * i / 4.0;
    out += fmt::format(R"(<text x="{}" y="{}" text-anchor="end" font-size="10">{:.3g}</text>)",
                       p.x0 - 4, p.py(y) + 3, y);
    out += fmt::format(R"(<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="#eee"/>)", p.x0, p.x0 + p.w,
                       p.py(y), p.py(y));
  }
  for (const auto& [x, label] : xticks)
    out += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle" font-size="10">{}</text>)",
                       p.px(x), p.y0 + p.h + 14, xml_text(label));
  return out;
}

}  // namespace

std::string sweep_plot(const json& board) {
  std::vector<std::string> keys;
  if (!board["trials"].empty())
    for (const auto& kv : board["trials"][0]["hyperparameters"])
      if (kv[0] != "seed") keys.push_back(kv[0]);
  const std::string xkey = keys.empty() ? "" : keys[0];
  const std::string skey =
      keys.size() > 1
          ? (std::find(keys.begin(), keys.end(), "epochs") != keys.end() && xkey != "epochs"
                 ? "epochs"
                 : keys[1])
          : "";
  const bool log_x = xkey == "learning_rate";

  // x positions: numeric values (log for the learning rate), else categories in order.
  std::vector<std::string> xvalues, series;
  for (const auto& t : board["trials"]) {
    const auto x = value_of(t["hyperparameters"], xkey), s = value_of(t["hyperparameters"], skey);
    if (std::find(xvalues.begin(), xvalues.end(), x) == xvalues.end()) xvalues.push_back(x);
    if (std::find(series.begin(), series.end(), s) == series.end()) series.push_back(s);
  }
  bool numeric = !xvalues.empty();
  for (const auto& x : xvalues)
    numeric = numeric && parse_double(x).has_value() && (!log_x || *parse_double(x) > 0);
  const auto xpos = [&](const std::string& x) {
    if (!numeric)
      return static_cast<double>(std::find(xvalues.begin(), xvalues.end(), x) - xvalues.begin());
    const double v = *parse_double(x);
    return log_x ? std::log10(v) : v;
  };

  double ymin = std::numeric_limits<double>::infinity(), ymax = -ymin;
  double lmin = ymin, lmax = -ymin;
  for (const auto& t : board["trials"]) {
    if (!t.contains("main")) continue;
    ymin = std::min(ymin, t["main"].get<double>());
    ymax = std::max(ymax, t["main"].get<double>());
    for (const auto& l : t["losses"]) {
      lmin = std::min(lmin, l.get<double>());
      lmax = std::max(lmax, l.get<double>());
    }
  }
  if (!std::isfinite(ymin)) ymin = 0, ymax = 1;
  if (!std::isfinite(lmin)) lmin = 0, lmax = 1;
  const double pad = std::max(1e-3, (ymax - ymin) * 0.1);
  double xmin = std::numeric_limits<double>::infinity(), xmax = -xmin;
  for (const auto& x : xvalues) xmin = std::min(xmin, xpos(x)), xmax = std::max(xmax, xpos(x));
  if (!std::isfinite(xmin)) xmin = 0, xmax = 1;
  const double xpad = std::max(0.05, (xmax - xmin) * 0.08);

  Panel left{70, 40, 360, 260, xmin - xpad, xmax + xpad, ymin - pad, ymax + pad};
  Panel right{540, 40, 360, 260, 0, 1, lmin, lmax + (lmax - lmin) * 0.05};
  const std::string metric = board.value("main_metric", "score");
  std::string svg =
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="960" height="360" font-family="sans-serif">)";
  svg += R"(<rect width="960" height="360" fill="white"/>)";
  std::vector<std::pair<double, std::string>> ticks;
  for (const auto& x : xvalues) ticks.emplace_back(xpos(x), x);
  svg += axes(left, "dev " + metric + " (dots: trials; lines: mean)", xkey.empty() ? "trial" : xkey,
              metric, ticks);
  svg += axes(right, "training loss", "fraction of training", "loss",
              {{0, "0"}, {0.5, "0.5"}, {1, "1"}});

  for (size_t si = 0; si < series.size(); ++si) {
    const char* color = kColors[si % std::size(kColors)];
    std::map<double, std::pair<double, int>> sums;
    for (const auto& t : board["trials"]) {
      if (value_of(t["hyperparameters"], skey) != series[si]) continue;
      const double x = xpos(value_of(t["hyperparameters"], xkey));
      if (t.contains("main")) {
        const double y = t["main"];
        svg +=
            fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="3" fill="{}" fill-opacity="0.5"/>)",
                        left.px(x), left.py(y), color);
        sums[x].first += y;
        sums[x].second += 1;
      }
      const auto& losses = t.contains("losses") ? t["losses"] : json::array();
      if (losses.size() > 1) {
        std::string points;
        for (size_t i = 0; i < losses.size(); ++i)
          points +=
              fmt::format("{:.1f},{:.1f} ",
                          right.px(static_cast<double>(i + 1) / static_cast<double>(losses.size())),
                          right.py(losses[i].get<double>()));
        svg +=
            fmt::format(R"(<polyline points="{}" fill="none" stroke="{}" stroke-opacity="0.6"/>)",
                        points, color);
      }
    }
    std::string line;
    for (const auto& [x, sum] : sums)
      line += fmt::format("{:.1f},{:.1f} ", left.px(x), left.py(sum.first / sum.second));
    svg += fmt::format(R"(<polyline points="{}" fill="none" stroke="{}" stroke-width="2"/>)", line,
                       color);
    if (!skey.empty())
      svg += fmt::format(R"(<text x="{}" y="{}" font-size="11" fill="{}">{} = {}</text>)",
                         left.x0 + 8, left.y0 + 14 + 14 * static_cast<double>(si), color, skey,
                         xml_text(series[si]));
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace bert::recipes
