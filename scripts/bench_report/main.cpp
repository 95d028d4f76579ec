// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// ntrdma-bench-report --out DIR [--link METRIC] [--floor METRIC]
//                     [--require topo|system|metric]... FILE...
// Reads sample files (report.hpp), writes DIR/results.json, DIR/results.md,
// DIR/chart.gp and its data files (the script writes DIR/chart.png when run by
// gnuplot in DIR), prints the markdown table. Exit 0; 1 when there are no
// samples or a required row has no positive result; 2 on bad input.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "report.hpp"

namespace {

int usage() {
    std::cerr << "usage: ntrdma-bench-report --out DIR [--link METRIC] [--floor METRIC] "
                 "[--require 'topo|system|metric']... FILE...\n";
    return 2;
}

bool write_file(const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::binary);
    f << text;
    f.close();
    if (!f) std::cerr << "ntrdma-bench-report: cannot write " << path << "\n";
    return static_cast<bool>(f);
}

}  // namespace

int main(int argc, char** argv) {
    std::string out;
    bench::Limits limits;
    std::vector<std::string> files, req;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if ((a == "--out" || a == "--link" || a == "--floor" || a == "--require") && i + 1 < argc) {
            std::string v = argv[++i];
            if (a == "--out")
                out = v;
            else if (a == "--link")
                limits.link_metric = v;
            else if (a == "--floor")
                limits.floor_metric = v;
            else
                req.push_back(v);
        } else if (a.starts_with("--")) {
            return usage();
        } else {
            files.push_back(a);
        }
    }
    if (out.empty() || files.empty()) return usage();

    std::vector<bench::Sample> samples;
    try {
        for (const auto& f : files) {
            std::ifstream in(f, std::ios::binary);
            if (!in) {
                std::cerr << "ntrdma-bench-report: cannot read " << f << "\n";
                return 2;
            }
            std::stringstream ss;
            ss << in.rdbuf();
            auto v = bench::parse(ss.str());
            samples.insert(samples.end(), v.begin(), v.end());
        }
    } catch (const std::exception& e) {
        std::cerr << "ntrdma-bench-report: " << e.what() << "\n";
        return 2;
    }
    bench::Report rep;
    try {
        rep = bench::summarize(samples, limits);
    } catch (const std::exception& e) {
        std::cerr << "ntrdma-bench-report: " << e.what() << "\n";
        return 2;
    }
    std::string md = bench::markdown(rep, limits);
    bench::Chart ch = bench::chart(rep, "chart.png");
    bool ok = write_file(out + "/results.json", bench::json(samples, rep)) &&
              write_file(out + "/results.md", md) && write_file(out + "/chart.gp", ch.script);
    for (const auto& [name, text] : ch.data) ok = ok && write_file(out + "/" + name, text);
    if (!ok) return 2;
    std::cout << md;
    if (samples.empty()) {
        std::cerr << "ntrdma-bench-report: no samples\n";
        return 1;
    }
    auto missing = bench::check_required(rep, req);
    for (const auto& m : missing)
        std::cerr << "ntrdma-bench-report: required row missing: " << m << "\n";
    return missing.empty() ? 0 : 1;
}
