// HTML for fwlab's pages (`fwlab site`, `fwlab serve`): escaping, the page frame with its inline style, and
// line charts drawn as inline SVG. Self-contained: no script, no font, nothing fetched from anywhere.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fwlab::html {

// Every string that comes from an experiment file or the database goes through this: & < > " ' become entities.
std::string esc(std::string_view text);

// What a page may load: no script, nothing from outside it (images only from data: addresses, style inline).
// `fwlab serve` sends it as a header too.
extern const char* kContentPolicy;

// A whole page. `refresh_s` > 0: the browser reloads it that often (a sweep is running).
std::string page(const std::string& title, const std::string& body, int refresh_s = 0);

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (step, value); non-finite values are left out
  std::optional<double> stopped_at;               // the step where the run diverged: marked with a cross
};

// A line chart of the series against the step: axes with their ranges, a legend below it, one colour per series,
// each point dotted (a run validated once still shows), a diverged run's cross at its last value (or at the top
// where it has none). `log_y` draws the value axis logarithmically where every value is positive.
std::string line_chart(const std::string& title, const std::vector<Series>& series, bool log_y = false);

// Whether values spanning this range read better on a log axis: all positive, over a factor of 10.
bool spans_decades(const std::vector<Series>& series);

struct Bar {
  std::string label, note;  // note: shown after the bar ("2 of 4")
  double value = 0;         // 0..1
};
// Horizontal bars of shares in [0, 1], one per label.
std::string bar_chart(const std::string& title, const std::vector<Bar>& bars);

// The bytes as base64 (an SVG made by gnuplot shown through an <img>, which never runs what it holds).
std::string base64(std::string_view bytes);

}  // namespace fwlab::html
