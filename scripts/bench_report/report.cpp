// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "report.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>
#include <stdexcept>

namespace bench {
namespace {

std::vector<std::string_view> split_tabs(std::string_view s) {
    std::vector<std::string_view> out;
    size_t start = 0;
    for (;;) {
        size_t tab = s.find('\t', start);
        if (tab == std::string_view::npos) {
            out.push_back(s.substr(start));
            return out;
        }
        out.push_back(s.substr(start, tab - start));
        start = tab + 1;
    }
}

double to_double(std::string_view s, const char* what, int lineno) {
    double v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v))
        throw std::runtime_error(std::to_string(lineno) + ": bad " + what + " '" + std::string(s) +
                                 "'");
    return v;
}

void add_unique(std::vector<std::string>& v, const std::string& s) {
    if (std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
}

std::string json_str(std::string_view s) {
    std::string o = "\"";
    for (char c : s) {
        switch (c) {
            case '"':
                o += "\\\"";
                break;
            case '\\':
                o += "\\\\";
                break;
            case '\n':
                o += "\\n";
                break;
            case '\t':
                o += "\\t";
                break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    char b[8];
                    std::snprintf(b, sizeof b, "\\u%04x", c);
                    o += b;
                } else {
                    o += c;
                }
        }
    }
    return o + "\"";
}

std::string json_num(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.6g", v);
    return b;
}

std::string json_opt(const std::optional<double>& v) { return v ? json_num(*v) : "null"; }

std::string md_escape(std::string_view s) {
    std::string o;
    for (char c : s) {
        if (c == '|') o += "\\";
        o += c;
    }
    return o;
}

}  // namespace

Sample parse_line(std::string_view line, int lineno) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    auto f = split_tabs(line);
    if (f.size() < 8 || f.size() == 10 || f.size() > 12)
        throw std::runtime_error(std::to_string(lineno) +
                                 ": expected 8, 9, 11 or 12 tab-separated fields, got " +
                                 std::to_string(f.size()));
    Sample s;
    s.topo = f[0];
    s.system = f[1];
    s.metric = f[2];
    s.unit = f[3];
    if (s.topo.empty() || s.system.empty() || s.metric.empty() || s.unit.empty())
        throw std::runtime_error(std::to_string(lineno) + ": empty topo/system/metric/unit");
    double r = to_double(f[4], "round", lineno);
    if (r < 0 || r != std::floor(r))
        throw std::runtime_error(std::to_string(lineno) + ": bad round");
    s.round = static_cast<int>(r);
    if (f[5] != "NA") s.value = to_double(f[5], "value", lineno);
    s.cpu_s = to_double(f[6], "cpu seconds", lineno);
    s.bytes = to_double(f[7], "bytes", lineno);
    if (f.size() >= 9) s.note = f[8];
    if (f.size() >= 11 && f[9] != "NA") s.cpu_a_s = to_double(f[9], "cpu seconds a", lineno);
    if (f.size() >= 11 && f[10] != "NA") s.cpu_b_s = to_double(f[10], "cpu seconds b", lineno);
    if (f.size() == 12) s.msgs = to_double(f[11], "messages", lineno);
    if (s.msgs < 0) throw std::runtime_error(std::to_string(lineno) + ": negative messages");
    return s;
}

std::vector<Sample> parse(std::string_view text) {
    std::vector<Sample> out;
    int lineno = 0;
    while (!text.empty()) {
        size_t nl = text.find('\n');
        std::string_view line = text.substr(0, nl);
        text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
        ++lineno;
        if (line.empty() || line == "\r" || line.front() == '#') continue;
        out.push_back(parse_line(line, lineno));
    }
    return out;
}

double median(std::vector<double> v) {
    if (v.empty()) throw std::invalid_argument("median of nothing");
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double byte_rate_scale(std::string_view unit) {
    if (unit == "Gbit/s") return 1e9 / 8;
    if (unit == "Mbit/s") return 1e6 / 8;
    if (unit == "GB/s") return 1e9;
    if (unit == "MB/s") return 1e6;
    if (unit == "MiB/s") return 1024.0 * 1024;
    return 0;
}

bool lower_is_better(std::string_view unit) { return unit == "us" || unit == "ms"; }

const Row* Report::find(std::string_view topo, std::string_view system,
                        std::string_view metric) const {
    for (const auto& r : rows)
        if (r.topo == topo && r.system == system && r.metric == metric) return &r;
    return nullptr;
}

namespace {

// CPU per GB moved and per message, medians over the rounds (all, a, b).
struct CpuCosts {
    std::vector<double> gb, gb_a, gb_b, msg, msg_a, msg_b;
    void add(const Sample& s) {
        if (s.bytes > 0) {
            double gbs = s.bytes / 1e9;
            gb.push_back(s.cpu_s / gbs);
            if (s.cpu_a_s) gb_a.push_back(*s.cpu_a_s / gbs);
            if (s.cpu_b_s) gb_b.push_back(*s.cpu_b_s / gbs);
        }
        if (s.msgs > 0) {
            double us = 1e6 / s.msgs;
            msg.push_back(s.cpu_s * us);
            if (s.cpu_a_s) msg_a.push_back(*s.cpu_a_s * us);
            if (s.cpu_b_s) msg_b.push_back(*s.cpu_b_s * us);
        }
    }
    static void set(std::optional<double>& o, const std::vector<double>& v) {
        if (!v.empty()) o = median(v);
    }
    void apply(Row& row) const {
        set(row.cpu_per_gb, gb);
        set(row.cpu_per_gb_a, gb_a);
        set(row.cpu_per_gb_b, gb_b);
        set(row.cpu_us_per_msg, msg);
        set(row.cpu_us_per_msg_a, msg_a);
        set(row.cpu_us_per_msg_b, msg_b);
    }
};

// The median of METRIC in TOPO (the first system that has it), if any.
const Row* limit_row(const Report& rep, const std::string& topo, const std::string& metric) {
    for (const auto& l : rep.rows)
        if (l.topo == topo && l.metric == metric && l.n && l.med > 0) return &l;
    return nullptr;
}

void add_ratios(Report& rep, const Limits& limits) {
    for (auto& row : rep.rows) {
        if (!row.n) continue;
        double scale = byte_rate_scale(row.unit);
        const Row* link = scale > 0 ? limit_row(rep, row.topo, limits.link_metric) : nullptr;
        if (link && byte_rate_scale(link->unit) > 0)
            row.vs_link = row.med * scale / (link->med * byte_rate_scale(link->unit));
        const Row* floor =
            lower_is_better(row.unit) ? limit_row(rep, row.topo, limits.floor_metric) : nullptr;
        if (floor && floor->unit == row.unit) row.vs_floor = row.med / floor->med;
        for (const auto& p : rep.rows) {
            if (&p == &row || p.topo != row.topo || p.metric != row.metric || !p.n || p.med == 0)
                continue;
            row.vs_peers.emplace_back(p.system, row.med / p.med);
        }
    }
}

}  // namespace

Report summarize(const std::vector<Sample>& samples, const Limits& limits) {
    Report rep;
    for (const auto& s : samples) {
        add_unique(rep.topos, s.topo);
        add_unique(rep.metrics, s.metric);
        add_unique(rep.systems, s.system);
    }
    for (const auto& t : rep.topos) {
        for (const auto& m : rep.metrics) {
            for (const auto& sys : rep.systems) {
                Row row;
                CpuCosts costs;
                bool any = false;
                for (const auto& s : samples) {
                    if (s.topo != t || s.metric != m || s.system != sys) continue;
                    if (!any) {
                        row.topo = t;
                        row.system = sys;
                        row.metric = m;
                        row.unit = s.unit;
                        any = true;
                    } else if (s.unit != row.unit) {
                        throw std::runtime_error("mixed units for " + t + "/" + sys + "/" + m);
                    }
                    if (!s.value) {
                        row.failed++;
                        if (row.reason.empty()) row.reason = s.note.empty() ? "no result" : s.note;
                        continue;
                    }
                    row.values.push_back(*s.value);
                    costs.add(s);
                }
                if (!any) continue;
                row.n = static_cast<int>(row.values.size());
                if (row.n) {
                    row.med = median(row.values);
                    row.lo = *std::min_element(row.values.begin(), row.values.end());
                    row.hi = *std::max_element(row.values.begin(), row.values.end());
                }
                costs.apply(row);
                rep.rows.push_back(std::move(row));
            }
        }
    }
    add_ratios(rep, limits);  // once all medians are known
    return rep;
}

std::string fmt_value(double v) {
    char b[32];
    double a = std::fabs(v);
    if (a == 0)
        return "0";
    else if (a >= 100)
        std::snprintf(b, sizeof b, "%.0f", v);
    else if (a >= 10)
        std::snprintf(b, sizeof b, "%.1f", v);
    else if (a >= 1)
        std::snprintf(b, sizeof b, "%.2f", v);
    else
        std::snprintf(b, sizeof b, "%.3g", v);
    return b;
}

namespace {

std::string fmt_opt(const std::optional<double>& v, std::string_view suffix = "") {
    return v ? fmt_value(*v) + std::string(suffix) : std::string("-");
}

// "1.50 (a 0.25, b 1.25)" per GB, or "12.0 us/msg (a 6.00, b 6.00)".
std::string cpu_cell(const Row& row) {
    const auto& all = row.cpu_per_gb ? row.cpu_per_gb : row.cpu_us_per_msg;
    const auto& a = row.cpu_per_gb ? row.cpu_per_gb_a : row.cpu_us_per_msg_a;
    const auto& b = row.cpu_per_gb ? row.cpu_per_gb_b : row.cpu_us_per_msg_b;
    std::string c = fmt_opt(all, row.cpu_per_gb || !all ? "" : " us/msg");
    if (a && b) c += " (a " + fmt_value(*a) + ", b " + fmt_value(*b) + ")";
    return c;
}

}  // namespace

std::string markdown(const Report& r, const Limits& limits) {
    std::ostringstream o;
    for (const auto& t : r.topos) {
        o << "#### Topology: " << t << "\n\n";
        o << "| metric | system | median [min-max] | n | / copy limit | / doorbell RTT | vs peers "
             "(this/peer) | guest CPU s/GB or us/msg |\n";
        o << "|---|---|---|---|---|---|---|---|\n";
        for (const auto& row : r.rows) {
            if (row.topo != t) continue;
            o << "| " << md_escape(row.metric) << " | " << md_escape(row.system) << " | ";
            if (!row.n) {
                std::string why =
                    row.reason.size() > 120 ? row.reason.substr(0, 117) + "..." : row.reason;
                o << "n/a (" << md_escape(why) << ") | 0 | | | | |\n";
                continue;
            }
            o << fmt_value(row.med) << " [" << fmt_value(row.lo) << "-" << fmt_value(row.hi) << "] "
              << md_escape(row.unit) << " | " << row.n;
            if (row.failed) o << " (+" << row.failed << " failed)";
            o << " | " << fmt_opt(row.vs_link) << " | " << fmt_opt(row.vs_floor) << " | ";
            if (row.vs_peers.empty()) o << "-";
            for (size_t i = 0; i < row.vs_peers.size(); ++i)
                o << (i ? ", " : "") << fmt_value(row.vs_peers[i].second) << "x "
                  << md_escape(row.vs_peers[i].first);
            o << " | " << cpu_cell(row) << " |\n";
        }
        o << "\n";
    }
    o << "Median of the rounds, [min-max]; n = rounds with a result. \"/ copy limit\": the "
         "median byte rate over the median of `"
      << limits.link_metric
      << "` in the same topology; \"/ doorbell RTT\": the median latency over the median of `"
      << limits.floor_metric
      << "` (a latency under 1 needs no doorbell). Ratios to peers are this system's median "
         "over the peer's (for latency, lower is better). Guest CPU: CPU time of all guests "
         "(from /proc/stat) per GB of payload moved, or per message where the sample counts "
         "them (the doorbell round trip, qperf rc_lat); in the pair topology also per side: "
         "a = the client's guest (requester, sender), b = the server's (responder, "
         "receiver).\n";
    return o.str();
}

std::string json(const std::vector<Sample>& samples, const Report& r) {
    std::ostringstream o;
    o << "{\n  \"samples\": [\n";
    for (size_t i = 0; i < samples.size(); ++i) {
        const auto& s = samples[i];
        o << "    {\"topology\": " << json_str(s.topo) << ", \"system\": " << json_str(s.system)
          << ", \"metric\": " << json_str(s.metric) << ", \"unit\": " << json_str(s.unit)
          << ", \"round\": " << s.round << ", \"value\": " << json_opt(s.value)
          << ", \"cpu_seconds\": " << json_num(s.cpu_s) << ", \"bytes\": " << json_num(s.bytes)
          << ", \"cpu_seconds_a\": " << json_opt(s.cpu_a_s)
          << ", \"cpu_seconds_b\": " << json_opt(s.cpu_b_s)
          << ", \"messages\": " << json_num(s.msgs) << ", \"note\": " << json_str(s.note) << "}"
          << (i + 1 < samples.size() ? "," : "") << "\n";
    }
    o << "  ],\n  \"summary\": [\n";
    for (size_t i = 0; i < r.rows.size(); ++i) {
        const auto& row = r.rows[i];
        o << "    {\"topology\": " << json_str(row.topo) << ", \"system\": " << json_str(row.system)
          << ", \"metric\": " << json_str(row.metric) << ", \"unit\": " << json_str(row.unit)
          << ", \"n\": " << row.n << ", \"failed\": " << row.failed;
        if (row.n) {
            o << ", \"median\": " << json_num(row.med) << ", \"min\": " << json_num(row.lo)
              << ", \"max\": " << json_num(row.hi);
            const std::pair<const char*, const std::optional<double>*> optional[] = {
                {"cpu_seconds_per_gb", &row.cpu_per_gb},
                {"cpu_seconds_per_gb_a", &row.cpu_per_gb_a},
                {"cpu_seconds_per_gb_b", &row.cpu_per_gb_b},
                {"cpu_us_per_message", &row.cpu_us_per_msg},
                {"cpu_us_per_message_a", &row.cpu_us_per_msg_a},
                {"cpu_us_per_message_b", &row.cpu_us_per_msg_b},
                {"ratio_to_link_limit", &row.vs_link},
                {"ratio_to_latency_floor", &row.vs_floor},
            };
            for (const auto& [key, v] : optional) o << ", \"" << key << "\": " << json_opt(*v);
            o << ", \"ratio_to_peers\": {";
            for (size_t k = 0; k < row.vs_peers.size(); ++k)
                o << (k ? ", " : "") << json_str(row.vs_peers[k].first) << ": "
                  << json_num(row.vs_peers[k].second);
            o << "}";
        } else {
            o << ", \"na_reason\": " << json_str(row.reason);
        }
        o << "}" << (i + 1 < r.rows.size() ? "," : "") << "\n";
    }
    o << "  ]\n}\n";
    return o.str();
}

namespace {

// One chart panel: which rows it shows and the value of a row in it.
struct Panel {
    std::string kind, title, ylabel;
    bool wants(const Row& row) const {
        if (!row.n || row.system == "ntb_hw_ivshmem") return false;  // the limits themselves
        bool eth = row.metric.starts_with("iperf3");
        if (kind == "eth") return eth && row.vs_link;
        if (kind == "rdma") return !eth && row.vs_link;
        return lower_is_better(row.unit) && !row.metric.ends_with(" p99") &&
               !row.metric.ends_with(" mean");
    }
    // value, min, max in the panel's unit
    std::array<double, 3> values(const Row& row, bool per_floor) const {
        double k = 1;
        if (kind != "lat")
            k = *row.vs_link / row.med;
        else if (per_floor)
            k = *row.vs_floor / row.med;
        return {row.med * k, row.lo * k, row.hi * k};
    }
};

// The panel's data file: one line per metric, value/lo/hi per system.
std::string panel_data(const Report& r, const std::string& t, const Panel& p, bool per_floor,
                       std::vector<std::string>& metrics, std::vector<std::string>& systems) {
    for (const auto& row : r.rows) {
        if (row.topo != t || !p.wants(row) || (p.kind == "lat" && per_floor && !row.vs_floor))
            continue;
        add_unique(metrics, row.metric);
        add_unique(systems, row.system);
    }
    std::ostringstream d;
    d << "# metric";
    for (const auto& sys : systems) d << " \"" << sys << "\" lo hi";
    d << "\n";
    for (const auto& m : metrics) {
        d << "\"" << m << "\"";
        for (const auto& sys : systems) {
            const Row* row = r.find(t, sys, m);
            if (!row || !p.wants(*row) || (p.kind == "lat" && per_floor && !row->vs_floor)) {
                d << " ? ? ?";
                continue;
            }
            for (double v : p.values(*row, per_floor)) d << " " << json_num(v);
        }
        d << "\n";
    }
    return d.str();
}

}  // namespace

Chart chart(const Report& r, std::string_view png_path) {
    Chart c;
    // Per topology: where each system stands against the two limits, one
    // panel per group of alternatives (log scales; 1 = the limit).
    const Panel panels[] = {
        {"eth", "Ethernet / copy limit", "ratio to the copy limit (log)"},
        {"rdma", "RDMA throughput / copy limit", "ratio to the copy limit (log)"},
        {"lat", "latency / doorbell round trip", "ratio to the doorbell RTT (log)"},
    };
    std::ostringstream s;
    int nrows = std::max(static_cast<int>(r.topos.size()), 1);
    s << "set terminal pngcairo size 2000," << 450 * nrows << " font ',9'\n";
    s << "set output '" << png_path << "'\n";
    s << "set datafile missing '?'\nset style data histograms\n"
         "set style histogram errorbars gap 1 lw 1\nset style fill solid 0.8 border -1\n"
         "set boxwidth 0.9\nset xtics rotate by -30 left\nset grid ytics\n"
         "set key outside top center horizontal\nset bars 0.5\nset termoption noenhanced\n"
         "set logscale y\n";
    s << "set multiplot layout " << nrows << ",3\n";
    for (const auto& t : r.topos) {
        bool per_floor = false;
        for (const auto& row : r.rows)
            if (row.topo == t && row.vs_floor && panels[2].wants(row)) per_floor = true;
        for (const auto& p : panels) {
            std::vector<std::string> metrics, systems;
            std::string fname = "chart-" + t + "-" + p.kind + ".dat";
            c.data[fname] = panel_data(r, t, p, per_floor, metrics, systems);
            bool in_us = p.kind == "lat" && !per_floor;
            s << "set title '" << t << ": "
              << (in_us ? "latency (no doorbell RTT measured)" : p.title) << "'\n";
            s << "set ylabel '" << (in_us ? "us (log)" : p.ylabel) << "'\n";
            if (metrics.empty()) {
                s << "set label 1 'no data' at graph 0.5,0.5 center\n"
                     "plot [][1:10] NaN notitle\nunset label 1\n";
                continue;
            }
            s << "plot ";
            for (size_t i = 0; i < systems.size(); ++i) {
                s << (i ? ", " : "") << "'" << fname << "' using " << 2 + 3 * i << ":" << 3 + 3 * i
                  << ":" << 4 + 3 * i;
                if (i == 0) s << ":xtic(1)";
                // one colour per system in every panel
                auto it = std::find(r.systems.begin(), r.systems.end(), systems[i]);
                s << " lt " << 1 + (it - r.systems.begin()) << " title '" << systems[i] << "'";
            }
            if (!in_us) s << ", 1 with lines dt 2 lc rgb 'black' title 'limit'";
            s << "\n";
        }
    }
    s << "unset multiplot\n";
    c.script = s.str();
    return c;
}

std::vector<std::string> check_required(const Report& r, const std::vector<std::string>& req) {
    std::vector<std::string> missing;
    for (const auto& q : req) {
        size_t a = q.find('|'), b = a == std::string::npos ? a : q.find('|', a + 1);
        if (b == std::string::npos) {
            missing.push_back(q + ": not of the form topo|system|metric");
            continue;
        }
        const Row* row = r.find(q.substr(0, a), q.substr(a + 1, b - a - 1), q.substr(b + 1));
        if (!row)
            missing.push_back(q + ": no samples");
        else if (!row->n)
            missing.push_back(q + ": n/a (" + row->reason + ")");
        else if (!(row->med > 0))
            missing.push_back(q + ": median " + fmt_value(row->med));
    }
    return missing;
}

}  // namespace bench
