// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// make bench: samples (written by scripts/bench-guest.sh) to summaries,
// ratios, JSON, a markdown table and gnuplot input.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bench {

// One measurement (or one failed attempt, value empty + note = reason).
struct Sample {
    std::string topo;
    std::string system;
    std::string metric;
    std::string unit;
    int round = 0;
    std::optional<double> value;
    double cpu_s = 0;  // guest CPU seconds (all guests) during the measurement
    double bytes = 0;  // payload bytes moved (0: not a transfer)
    std::string note;  // n/a reason or free text
    // The same CPU time per side (pair topology): a = the client's host
    // (requester, sender), b = the server's (responder, receiver).
    std::optional<double> cpu_a_s, cpu_b_s;
};

// Sample file format, one record per line, tab-separated:
//   topo system metric unit round value cpu_s bytes [note [cpu_a_s cpu_b_s]]
// value "NA" marks a failed or unsupported measurement (note says why);
// cpu_a_s / cpu_b_s "NA" when the sides share one guest (loop topology).
// Blank lines and lines starting with '#' are ignored.
// Throws std::runtime_error("LINE: what") on a malformed record.
Sample parse_line(std::string_view line, int lineno = 0);
std::vector<Sample> parse(std::string_view text);

double median(std::vector<double> v);  // v non-empty

// Bytes per second per unit, 0 when the unit is not a byte rate.
double byte_rate_scale(std::string_view unit);
bool lower_is_better(std::string_view unit);

struct Row {
    std::string topo, system, metric, unit;
    int n = 0;  // numeric samples
    int failed = 0;
    double med = 0, lo = 0, hi = 0;
    std::optional<double> cpu_per_gb;                      // median guest CPU s per GB moved
    std::optional<double> cpu_per_gb_a, cpu_per_gb_b;      // the same per side (pair)
    std::optional<double> vs_link;                         // median / link limit (byte rates only)
    std::vector<std::pair<std::string, double>> vs_peers;  // this / peer
    std::string reason;                                    // when n == 0
    std::vector<double> values;
};

struct Report {
    std::vector<std::string> topos, metrics, systems;  // first-seen order
    std::vector<Row> rows;                             // topo, metric, system order
    const Row* find(std::string_view topo, std::string_view system, std::string_view metric) const;
};

// link_metric: the metric whose median (same topology) is the link limit.
Report summarize(const std::vector<Sample>& samples, std::string_view link_metric);

std::string fmt_value(double v);  // 3 significant digits, plain notation
std::string markdown(const Report& r, std::string_view link_metric);
std::string json(const std::vector<Sample>& samples, const Report& r);

// Gnuplot: one data file per topology and panel plus a script writing png_path.
struct Chart {
    std::string script;
    std::map<std::string, std::string> data;  // file name -> contents
};
Chart chart(const Report& r, std::string_view png_path);

// "topo|system|metric": each must have a numeric row with a positive median.
// Returns the missing ones (with why).
std::vector<std::string> check_required(const Report& r, const std::vector<std::string>& req);

}  // namespace bench
