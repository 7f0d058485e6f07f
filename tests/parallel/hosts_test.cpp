// The elastic supervisor's hosts (parallel/hosts.h): hostfile and discovery
// lines, slots dropped on failure, the cool-down after repeated failures,
// and hosts that leave and come back.
#include "parallel/hosts.h"

#include <gtest/gtest.h>

#include "support/support.h"

namespace cohort {
namespace {

using testing_support::error_of;

TEST(Hosts, ReadsHostfileAndDiscoveryLines) {
  auto h = parse_hostfile("# two hosts\na slots=2\n\nb slots=3 # the big one\nc\n", "hf");
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0].name, "a");
  EXPECT_EQ(h[1].slots, 3);
  EXPECT_EQ(h[2].slots, 1);
  auto d = parse_discovery("a:2\nb:1\n", "s");
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].slots, 2);
  EXPECT_NE(error_of([] { parse_hostfile("a slots=x\n", "hf"); }).find("hf line 1"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_hostfile("a cpus=2\n", "hf"); }).find("host slots=K"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_discovery("a:0\n", "s.sh"); }).find("s.sh line 1"),
            std::string::npos);
}

TEST(Hosts, FailuresDropSlotsThenCoolDown) {
  HostPool pool(30);
  pool.update({{"a", 2}, {"b", 2}});
  EXPECT_EQ(pool.available(0), 4);
  EXPECT_EQ(pool.assign(3, 0), (std::vector<std::string>{"a", "a", "b"}));
  EXPECT_FALSE(pool.fail("b", 1, 2));  // first failure: b's slot sits out 30 s
  EXPECT_EQ(pool.available(1), 3);
  EXPECT_EQ(pool.next_return(1), 31);
  EXPECT_TRUE(pool.fail("b", 2, 2));  // second: b sits out
  EXPECT_EQ(pool.available(3), 2);
  EXPECT_EQ(pool.cooling(3), std::vector<std::string>{"b"});
  EXPECT_EQ(pool.next_return(3), 32);
  EXPECT_EQ(pool.available(33), 4);  // and returns whole
  EXPECT_EQ(pool.next_return(33), -1);
  // A cool-down that would leave fewer than `keep` slots is not imposed.
  EXPECT_FALSE(pool.fail("a", 40, 4));
  EXPECT_FALSE(pool.fail("a", 41, 4));
  EXPECT_EQ(pool.available(42), 2);
  EXPECT_EQ(pool.available(70.5), 3);  // a's failed slots return one by one
  EXPECT_EQ(pool.available(71.5), 4);
}

TEST(Hosts, DiscoveryRemovesAndAddsHosts) {
  HostPool pool;
  pool.update({{"a", 2}, {"b", 2}});
  pool.fail("a", 0, 1);
  pool.update({{"a", 2}});
  EXPECT_EQ(pool.available(1), 1);  // b gone, a still short of its failed slot for 30 s
  pool.update({{"a", 2}, {"b", 2}});
  EXPECT_EQ(pool.available(1), 3);  // b back
}

}  // namespace
}  // namespace cohort
