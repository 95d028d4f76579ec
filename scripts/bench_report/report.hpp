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
    double msgs = 0;  // messages (round trips) the CPU time covers (0: not counted)
};

// Sample file format, one record per line, tab-separated:
//   topo system metric unit round value cpu_s bytes [note [cpu_a_s cpu_b_s [msgs]]]
// value "NA" marks a failed or unsupported measurement (note says why);
// cpu_a_s / cpu_b_s "NA" when the sides share one guest (loop topology);
// msgs: the messages (latency round trips) the CPU time covers, 0 = none.
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
    std::optional<double> cpu_per_gb;                  // median guest CPU s per GB moved
    std::optional<double> cpu_per_gb_a, cpu_per_gb_b;  // the same per side (pair)
    std::optional<double> cpu_us_per_msg;              // median guest CPU us per message
    std::optional<double> cpu_us_per_msg_a, cpu_us_per_msg_b;
    std::optional<double> vs_link;   // median / link limit (byte rates only)
    std::optional<double> vs_floor;  // median / latency floor (latencies only)
    std::vector<std::pair<std::string, double>> vs_peers;  // this / peer
    std::string reason;                                    // when n == 0
    std::vector<double> values;
};

struct Report {
    std::vector<std::string> topos, metrics, systems;  // first-seen order
    std::vector<Row> rows;                             // topo, metric, system order
    const Row* find(std::string_view topo, std::string_view system, std::string_view metric) const;
};

// The two limits every row is read against (medians, same topology):
// byte rates over link_metric's, latencies over floor_metric's.
struct Limits {
    std::string link_metric = "flat window copy";
    std::string floor_metric = "doorbell round trip";
};
Report summarize(const std::vector<Sample>& samples, const Limits& limits = {});

std::string fmt_value(double v);  // 3 significant digits, plain notation
std::string markdown(const Report& r, const Limits& limits = {});
std::string json(const std::vector<Sample>& samples, const Report& r);

// Gnuplot: one data file per topology and panel plus a script writing png_path.
// Panels: Ethernet byte rates and RDMA byte rates over the link limit,
// latencies over the latency floor (or in us when there is none).
struct Chart {
    std::string script;
    std::map<std::string, std::string> data;  // file name -> contents
};
Chart chart(const Report& r, std::string_view png_path);

// "topo|system|metric": each must have a numeric row with a positive median.
// Returns the missing ones (with why).
std::vector<std::string> check_required(const Report& r, const std::vector<std::string>& req);

}  // namespace bench
