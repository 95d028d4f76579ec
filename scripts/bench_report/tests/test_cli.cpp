// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// The ntrdma-bench-report binary: files written, exit status for missing rows.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace fs = std::filesystem;

namespace {

struct Dir {
    fs::path p;
    Dir() {
        char tmpl[] = "/tmp/bench_report_test.XXXXXX";
        p = mkdtemp(tmpl);
    }
    ~Dir() { fs::remove_all(p); }
};

int run(const std::string& args) {
    std::string cmd = std::string(NTRDMA_BENCH_REPORT_BIN) + " " + args + " >/dev/null 2>&1";
    int st = std::system(cmd.c_str());
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void put(const fs::path& f, const std::string& text) { std::ofstream(f) << text; }

const char* kSamples =
    "loop\tntb_hw_ivshmem\tflat window copy\tMB/s\t1\t1000\t1\t134217728\n"
    "loop\tveth\tiperf3 TCP x1\tGbit/s\t1\t4\t2\t1e9\n"
    "loop\tntrdma\tib_send_lat 2 B\tus\t1\tNA\t0\t0\tno ntrdma verbs device\n";

}  // namespace

TEST(Cli, WritesEveryOutput) {
    Dir d;
    put(d.p / "s.tsv", kSamples);
    EXPECT_EQ(run("--out " + d.p.string() + " --require 'loop|veth|iperf3 TCP x1' " +
                  (d.p / "s.tsv").string()),
              0);
    for (const char* f : {"results.json", "results.md", "chart.gp", "chart-loop-eth.dat",
                          "chart-loop-rdma.dat", "chart-loop-lat.dat"})
        EXPECT_TRUE(fs::exists(d.p / f)) << f;
    // the default link limit is the flat window's copy rate: 4 Gbit/s = 500 MB/s = 0.5
    std::ifstream md(d.p / "results.md");
    std::string text((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("| iperf3 TCP x1 | veth | 4.00 [4.00-4.00] Gbit/s | 1 | 0.5 | - |"),
              std::string::npos)
        << text;
}

TEST(Cli, FailsOnMissingOrNaRequiredRow) {
    Dir d;
    put(d.p / "s.tsv", kSamples);
    std::string base = "--out " + d.p.string() + " ";
    EXPECT_EQ(run(base + "--require 'loop|ntr0|iperf3 TCP x1' " + (d.p / "s.tsv").string()), 1);
    EXPECT_EQ(run(base + "--require 'loop|ntrdma|ib_send_lat 2 B' " + (d.p / "s.tsv").string()), 1);
}

TEST(Cli, FailsOnNoSamplesAndBadInput) {
    Dir d;
    put(d.p / "empty.tsv", "# nothing\n");
    put(d.p / "bad.tsv", "loop\tveth\n");
    EXPECT_EQ(run("--out " + d.p.string() + " " + (d.p / "empty.tsv").string()), 1);
    EXPECT_EQ(run("--out " + d.p.string() + " " + (d.p / "bad.tsv").string()), 2);
    EXPECT_EQ(run("--out " + d.p.string() + " " + (d.p / "missing.tsv").string()), 2);
    EXPECT_EQ(run((d.p / "empty.tsv").string()), 2);  // no --out
}
