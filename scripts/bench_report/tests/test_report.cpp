// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <gtest/gtest.h>

#include "report.hpp"

using namespace bench;

namespace {
const Limits kDemo{"ntb_perf copy", "doorbell round trip"};
}  // namespace

TEST(Median, OddEvenSingle) {
    EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
    EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
    EXPECT_DOUBLE_EQ(median({7}), 7);
    EXPECT_THROW(median({}), std::invalid_argument);
}

TEST(Parse, Record) {
    Sample s = parse_line("loop\tveth\tiperf3 TCP x1\tGbit/s\t2\t8.5\t3.25\t1e9\tmtu 1500", 1);
    EXPECT_EQ(s.topo, "loop");
    EXPECT_EQ(s.system, "veth");
    EXPECT_EQ(s.metric, "iperf3 TCP x1");
    EXPECT_EQ(s.unit, "Gbit/s");
    EXPECT_EQ(s.round, 2);
    ASSERT_TRUE(s.value.has_value());
    EXPECT_DOUBLE_EQ(*s.value, 8.5);
    EXPECT_DOUBLE_EQ(s.cpu_s, 3.25);
    EXPECT_DOUBLE_EQ(s.bytes, 1e9);
    EXPECT_EQ(s.note, "mtu 1500");
}

TEST(Parse, CpuPerSide) {
    Sample s = parse_line("pair\tntrdma\tw\tMiB/s\t1\t9\t3\t2e9\t\t0.5\t2.5", 1);
    ASSERT_TRUE(s.cpu_a_s && s.cpu_b_s);
    EXPECT_DOUBLE_EQ(*s.cpu_a_s, 0.5);
    EXPECT_DOUBLE_EQ(*s.cpu_b_s, 2.5);
    Sample l = parse_line("loop\tntrdma\tw\tMiB/s\t1\t9\t3\t2e9\tx\tNA\tNA", 1);
    EXPECT_FALSE(l.cpu_a_s.has_value());
    EXPECT_THROW(parse_line("pair\tntrdma\tw\tMiB/s\t1\t9\t3\t2e9\tx\t1", 1),
                 std::runtime_error);  // 10 fields
    Report r = summarize({s}, kDemo);
    ASSERT_EQ(r.rows.size(), 1u);
    ASSERT_TRUE(r.rows[0].cpu_per_gb_a && r.rows[0].cpu_per_gb_b);
    EXPECT_DOUBLE_EQ(*r.rows[0].cpu_per_gb_a, 0.25);
    EXPECT_DOUBLE_EQ(*r.rows[0].cpu_per_gb_b, 1.25);
    EXPECT_NE(markdown(r, kDemo).find("| 1.50 (a 0.25, b 1.25) |"), std::string::npos)
        << markdown(r, kDemo);
    EXPECT_NE(json({s}, r).find("\"cpu_seconds_per_gb_b\": 1.25"), std::string::npos);
}

TEST(Parse, NotAvailableAndComments) {
    auto v = parse(
        "# header\n\nloop\tntrdma\tib_write_bw 64 B\tMB/s\t1\tNA\t0\t0\tno ntrdma "
        "verbs device\r\npair\tveth\tx\tus\t1\t5\t0\t0\n");
    ASSERT_EQ(v.size(), 2u);
    EXPECT_FALSE(v[0].value.has_value());
    EXPECT_EQ(v[0].note, "no ntrdma verbs device");
    EXPECT_EQ(v[1].note, "");
}

TEST(Parse, Malformed) {
    EXPECT_THROW(parse_line("loop\tveth\tm\tus\t1\t5\t0", 3), std::runtime_error);  // 7 fields
    EXPECT_THROW(parse_line("loop\tveth\tm\tus\t1\tfast\t0\t0", 3), std::runtime_error);
    EXPECT_THROW(parse_line("loop\tveth\tm\tus\t1.5\t1\t0\t0", 3), std::runtime_error);
    EXPECT_THROW(parse_line("loop\t\tm\tus\t1\t1\t0\t0", 3), std::runtime_error);
    EXPECT_THROW(parse_line("loop\tveth\tm\tus\t1\tnan\t0\t0", 3), std::runtime_error);
    try {
        parse("\n\nloop\tx");
        FAIL();
    } catch (const std::runtime_error& e) {
        EXPECT_EQ(std::string(e.what()).substr(0, 2), "3:");
    }
}

TEST(Units, ByteRates) {
    EXPECT_DOUBLE_EQ(byte_rate_scale("Gbit/s"), 125e6);
    EXPECT_DOUBLE_EQ(byte_rate_scale("MB/s"), 1e6);
    EXPECT_DOUBLE_EQ(byte_rate_scale("us"), 0);
    EXPECT_DOUBLE_EQ(byte_rate_scale("kpps"), 0);
    EXPECT_TRUE(lower_is_better("us"));
    EXPECT_FALSE(lower_is_better("Gbit/s"));
}

namespace {
std::vector<Sample> demo() {
    return parse(
        "loop\tntb_hw_ivshmem\tntb_perf copy\tMB/s\t1\t1000\t1\t134217728\n"
        "loop\tntb_hw_ivshmem\tntb_perf copy\tMB/s\t2\t1200\t1\t134217728\n"
        "loop\tntb_hw_ivshmem\tntb_perf copy\tMB/s\t3\t800\t1\t134217728\n"
        "loop\tveth\ttcp\tGbit/s\t1\t16\t2\t2e9\n"
        "loop\tveth\ttcp\tGbit/s\t2\t8\t2\t1e9\n"
        "loop\tveth\ttcp\tGbit/s\t3\t4\t2\t5e8\n"
        "loop\tntr0\ttcp\tGbit/s\t1\t2\t1\t1e9\n"
        "loop\tntr0\ttcp\tGbit/s\t2\tNA\t0\t0\tiperf3 failed\n"
        "loop\tntr0\ttcp\tGbit/s\t3\t4\t1\t1e9\n"
        "loop\tntrdma\tlat\tus\t1\tNA\t0\t0\tno ntrdma verbs device\n"
        "loop\trxe\tlat\tus\t1\t10\t0.1\t0\n"
        "pair\tveth\ttcp\tGbit/s\t1\t3\t1\t1e9\n");
}
}  // namespace

TEST(Summarize, MedianMinMaxAndFailures) {
    Report r = summarize(demo(), kDemo);
    EXPECT_EQ(r.topos, (std::vector<std::string>{"loop", "pair"}));
    const Row* link = r.find("loop", "ntb_hw_ivshmem", "ntb_perf copy");
    ASSERT_NE(link, nullptr);
    EXPECT_DOUBLE_EQ(link->med, 1000);
    EXPECT_DOUBLE_EQ(link->lo, 800);
    EXPECT_DOUBLE_EQ(link->hi, 1200);
    EXPECT_EQ(link->n, 3);
    ASSERT_TRUE(link->vs_link.has_value());
    EXPECT_DOUBLE_EQ(*link->vs_link, 1.0);

    const Row* ntr = r.find("loop", "ntr0", "tcp");
    ASSERT_NE(ntr, nullptr);
    EXPECT_EQ(ntr->n, 2);
    EXPECT_EQ(ntr->failed, 1);
    EXPECT_DOUBLE_EQ(ntr->med, 3);

    const Row* na = r.find("loop", "ntrdma", "lat");
    ASSERT_NE(na, nullptr);
    EXPECT_EQ(na->n, 0);
    EXPECT_EQ(na->reason, "no ntrdma verbs device");
    EXPECT_EQ(r.find("pair", "ntr0", "tcp"), nullptr);
}

TEST(Summarize, Ratios) {
    Report r = summarize(demo(), kDemo);
    const Row* veth = r.find("loop", "veth", "tcp");
    ASSERT_NE(veth, nullptr);
    // 8 Gbit/s = 1000 MB/s over a 1000 MB/s link
    ASSERT_TRUE(veth->vs_link.has_value());
    EXPECT_DOUBLE_EQ(*veth->vs_link, 1.0);
    ASSERT_EQ(veth->vs_peers.size(), 1u);
    EXPECT_EQ(veth->vs_peers[0].first, "ntr0");
    EXPECT_DOUBLE_EQ(veth->vs_peers[0].second, 8.0 / 3.0);
    // CPU s/GB: 2 s over 2, 1 and 0.5 GB -> median 2
    ASSERT_TRUE(veth->cpu_per_gb.has_value());
    EXPECT_DOUBLE_EQ(*veth->cpu_per_gb, 2.0);
    // Latency: no link ratio, no bytes, no CPU per GB; n/a peers are not compared.
    const Row* rxe = r.find("loop", "rxe", "lat");
    ASSERT_NE(rxe, nullptr);
    EXPECT_FALSE(rxe->vs_link.has_value());
    EXPECT_FALSE(rxe->cpu_per_gb.has_value());
    EXPECT_TRUE(rxe->vs_peers.empty());
    // No link limit measured in pair: no ratio.
    EXPECT_FALSE(r.find("pair", "veth", "tcp")->vs_link.has_value());
}

TEST(Summarize, MixedUnitsRejected) {
    auto v = parse("loop\ta\tm\tus\t1\t1\t0\t0\nloop\ta\tm\tms\t2\t1\t0\t0\n");
    EXPECT_THROW(summarize(v, Limits{"x"}), std::runtime_error);
}

TEST(Output, MarkdownShowsNaAndRatios) {
    auto samples = demo();
    Report r = summarize(samples, kDemo);
    std::string md = markdown(r, kDemo);
    EXPECT_NE(md.find("#### Topology: loop"), std::string::npos);
    EXPECT_NE(
        md.find("| tcp | veth | 8.00 [4.00-16.0] Gbit/s | 3 | 1.00 | - | 2.67x ntr0 | 2.00 |"),
        std::string::npos)
        << md;
    EXPECT_NE(md.find("n/a (no ntrdma verbs device)"), std::string::npos);
    EXPECT_NE(md.find("2 (+1 failed)"), std::string::npos);
}

TEST(Output, JsonHasEverySample) {
    auto samples = demo();
    Report r = summarize(samples, kDemo);
    std::string j = json(samples, r);
    size_t n = 0;
    for (size_t p = j.find("\"round\""); p != std::string::npos; p = j.find("\"round\"", p + 1))
        ++n;
    EXPECT_EQ(n, samples.size());
    EXPECT_NE(j.find("\"value\": null"), std::string::npos);
    EXPECT_NE(j.find("\"na_reason\": \"no ntrdma verbs device\""), std::string::npos);
    EXPECT_NE(j.find("\"ratio_to_peers\": {\"ntr0\": 2.66667}"), std::string::npos);
}

TEST(Output, ChartDataAndScript) {
    Report r = summarize(demo(), kDemo);
    Chart c = chart(r, "out.png");
    EXPECT_NE(c.script.find("set output 'out.png'"), std::string::npos);
    for (const char* f : {"chart-loop-eth.dat", "chart-loop-rdma.dat", "chart-loop-lat.dat"})
        ASSERT_TRUE(c.data.count(f)) << f;
    // "tcp" is not an iperf3 row: the RDMA panel; the limit itself is not a bar
    const std::string& bw = c.data["chart-loop-rdma.dat"];
    EXPECT_NE(bw.find("\"tcp\" 1 0.5 2 0.375 0.25 0.5"), std::string::npos) << bw;
    EXPECT_EQ(bw.find("ntb_perf copy"), std::string::npos) << bw;
    // no doorbell round trip in the demo: latencies in us
    EXPECT_NE(c.data["chart-loop-lat.dat"].find("\"lat\" 10 10 10"), std::string::npos)
        << c.data["chart-loop-lat.dat"];
    EXPECT_NE(c.script.find("latency (no doorbell RTT measured)"), std::string::npos);
    // pair has no link limit: empty panels, still plotted
    EXPECT_NE(c.script.find("no data"), std::string::npos);
}

TEST(Limits, LatencyOverDoorbellAndCpuPerMessage) {
    auto v = parse(
        "pair\tntb_hw_ivshmem\tdoorbell round trip\tus\t1\t200\t0.5\t0\tx\t0.2\t0.3\t10000\n"
        "pair\tntrdma\tib_write_lat 2 B\tus\t1\t4\t0.02\t0\tx\t0.01\t0.01\t1000\n"
        "pair\trxe\tib_write_lat 2 B\tus\t1\t400\t0.8\t0\n"
        "pair\trxe\tib_write_lat 2 B p99\tus\t1\t900\t0\t0\n"
        "pair\trxe\tib_write_lat 2 B mean\tus\t1\t450\t0\t0\n");
    EXPECT_DOUBLE_EQ(v[1].msgs, 1000);
    EXPECT_THROW(parse_line("pair\ta\tm\tus\t1\t1\t0\t0\tx\tNA\tNA\t-1", 1), std::runtime_error);
    Report r = summarize(v);  // default limits: the doorbell round trip is the floor
    const Row* ntr = r.find("pair", "ntrdma", "ib_write_lat 2 B");
    ASSERT_TRUE(ntr && ntr->vs_floor);
    EXPECT_DOUBLE_EQ(*ntr->vs_floor, 0.02);
    EXPECT_DOUBLE_EQ(*r.find("pair", "rxe", "ib_write_lat 2 B")->vs_floor, 2.0);
    ASSERT_TRUE(ntr->cpu_us_per_msg && ntr->cpu_us_per_msg_a && ntr->cpu_us_per_msg_b);
    EXPECT_DOUBLE_EQ(*ntr->cpu_us_per_msg, 20);  // 0.02 s over 1000 messages
    EXPECT_DOUBLE_EQ(*ntr->cpu_us_per_msg_b, 10);
    EXPECT_FALSE(r.find("pair", "rxe", "ib_write_lat 2 B")->cpu_us_per_msg);  // not counted
    std::string md = markdown(r);
    EXPECT_NE(md.find("| 0.02 | 0.01x rxe | 20.0 us/msg (a 10.0, b 10.0) |"), std::string::npos)
        << md;
    EXPECT_NE(json(v, r).find("\"ratio_to_latency_floor\": 0.02"), std::string::npos);
    // the latency panel: ratios, the doorbell row, p99 and mean rows left out
    Chart c = chart(r, "x.png");
    const std::string& lat = c.data["chart-pair-lat.dat"];
    EXPECT_NE(lat.find("\"ib_write_lat 2 B\" 0.02 0.02 0.02 2 2 2"), std::string::npos) << lat;
    EXPECT_EQ(lat.find("p99"), std::string::npos) << lat;
    EXPECT_EQ(lat.find("mean"), std::string::npos) << lat;
    EXPECT_EQ(lat.find("doorbell"), std::string::npos) << lat;
}

TEST(Required, MissingAndNa) {
    Report r = summarize(demo(), kDemo);
    auto m = check_required(r, {"loop|veth|tcp", "loop|ntrdma|lat", "pair|ntr0|tcp", "bad"});
    ASSERT_EQ(m.size(), 3u);
    EXPECT_NE(m[0].find("n/a (no ntrdma verbs device)"), std::string::npos);
    EXPECT_NE(m[1].find("no samples"), std::string::npos);
    EXPECT_NE(m[2].find("not of the form"), std::string::npos);
}
