#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gantry/autoscale/slurm_power.h"

namespace gantry::autoscale {
namespace {

using Hosts = std::vector<std::string>;

Hosts Expand(std::string_view expr) {
  auto r = ExpandHostlist(expr);
  EXPECT_TRUE(r.ok()) << expr << ": " << r.status().ToString();
  return r.ok() ? *r : Hosts{};
}

std::string ExpandError(std::string_view expr) {
  auto r = ExpandHostlist(expr);
  EXPECT_FALSE(r.ok()) << expr << " expanded to " << r->size() << " hosts";
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return r.status().message();
}

TEST(ExpandHostlist, PlainNamesAndCommas) {
  EXPECT_EQ(Expand("cpu01"), Hosts({"cpu01"}));
  EXPECT_EQ(Expand("a,b.example,c_d-1"), Hosts({"a", "b.example", "c_d-1"}));
  EXPECT_EQ(Expand(""), Hosts({}));
  // Slurm also separates by whitespace; empty entries are nothing.
  EXPECT_EQ(Expand(" a, b\tc,,d, "), Hosts({"a", "b", "c", "d"}));
}

TEST(ExpandHostlist, RangesAndLists) {
  EXPECT_EQ(Expand("gpu-[1-3,7],cpu01"), Hosts({"gpu-1", "gpu-2", "gpu-3", "gpu-7", "cpu01"}));
  EXPECT_EQ(Expand("n[5]"), Hosts({"n5"}));
  EXPECT_EQ(Expand("n[3-3]"), Hosts({"n3"}));
  EXPECT_EQ(Expand("[1-2]x"), Hosts({"1x", "2x"}));
  EXPECT_EQ(Expand("n[2,1]"), Hosts({"n2", "n1"}));  // order as written
}

TEST(ExpandHostlist, ZeroPaddingFollowsTheLowBound) {
  EXPECT_EQ(Expand("n[01-03]"), Hosts({"n01", "n02", "n03"}));
  EXPECT_EQ(Expand("n[8-10]"), Hosts({"n8", "n9", "n10"}));
  EXPECT_EQ(Expand("n[08-10]"), Hosts({"n08", "n09", "n10"}));
  EXPECT_EQ(Expand("n[098-100]"), Hosts({"n098", "n099", "n100"}));
  EXPECT_EQ(Expand("n[99-100]"), Hosts({"n99", "n100"}));
  EXPECT_EQ(Expand("n[0-1]"), Hosts({"n0", "n1"}));
  EXPECT_EQ(Expand("n[007,9]"), Hosts({"n007", "n9"}));
}

TEST(ExpandHostlist, SeveralBracketsAreACartesianProductLeftmostSlowest) {
  EXPECT_EQ(Expand("rack[1-2]-n[01-02]"),
            Hosts({"rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"}));
  EXPECT_EQ(Expand("r[1,3]n[1-2,5]s"),
            Hosts({"r1n1s", "r1n2s", "r1n5s", "r3n1s", "r3n2s", "r3n5s"}));
  EXPECT_EQ(Expand("a[1-2][3-4],z"), Hosts({"a13", "a14", "a23", "a24", "z"}));
}

TEST(ExpandHostlist, ErrorsNameTheExpressionAndThePosition) {
  EXPECT_EQ(ExpandError("gpu-[1-3"), "hostlist \"gpu-[1-3\": '[' not closed at position 5");
  EXPECT_EQ(ExpandError("gpu-1]"), "hostlist \"gpu-1]\": ']' without '[' at position 6");
  EXPECT_EQ(ExpandError("n[3-1]"), "hostlist \"n[3-1]\": range 3-1 runs backwards at position 3");
  EXPECT_EQ(ExpandError("n[]"), "hostlist \"n[]\": a number expected, not ']' at position 3");
  EXPECT_EQ(ExpandError("n[1-]"), "hostlist \"n[1-]\": a number expected, not ']' at position 5");
  EXPECT_EQ(ExpandError("n[-2]"), "hostlist \"n[-2]\": a number expected, not '-' at position 3");
  EXPECT_EQ(ExpandError("n[1,,2]"),
            "hostlist \"n[1,,2]\": a number expected, not ',' at position 5");
  EXPECT_EQ(ExpandError("n[a]"), "hostlist \"n[a]\": a number expected, not 'a' at position 3");
  EXPECT_EQ(ExpandError("n[1[2]]"),
            "hostlist \"n[1[2]]\": expected ',' or ']' in brackets, not '[' at position 4");
  EXPECT_EQ(ExpandError("n[1"), "hostlist \"n[1\": '[' not closed at position 2");
  EXPECT_EQ(ExpandError("n[1-"),
            "hostlist \"n[1-\": a number expected, the expression ended "
            "at position 5");
  EXPECT_NE(ExpandError("a;rm").find("unexpected ';' (host names are letters"), std::string::npos);
  EXPECT_NE(ExpandError("a\x01").find("unexpected byte 0x01"), std::string::npos);
  EXPECT_NE(ExpandError("n[1234567890123456789]").find("longer than 18 digits at position 3"),
            std::string::npos);
}

TEST(ExpandHostlist, CapsTheNumberOfHosts) {
  EXPECT_EQ(Expand("n[1-65536]").size(), 65536u);
  EXPECT_EQ(Expand("r[1-256]n[1-256]").size(), 65536u);
  const std::string one = ExpandError("n[1-65537]");
  EXPECT_EQ(one,
            "hostlist \"n[1-65537]\": expands to more than 65536 hosts (the limit of one "
            "expression) at position 2");
  // Without building them: a huge range and a huge product are both refused.
  EXPECT_NE(ExpandError("n[0-999999999999999999]").find("more than 65536 hosts"),
            std::string::npos);
  EXPECT_NE(ExpandError("a[1-1000]b[1-1000]c[1-1000]").find("more than 65536 hosts"),
            std::string::npos);
  // Across entries too.
  EXPECT_NE(ExpandError("n[1-65536],m1").find("more than 65536 hosts"), std::string::npos);
  EXPECT_NE(ExpandError("n[1-40000,1-40000]").find("more than 65536 hosts"), std::string::npos);
}

TEST(CompressHostlist, RangesOfTheLastNumber) {
  EXPECT_EQ(CompressHostlist({"gpu-1", "gpu-2", "gpu-3", "gpu-7", "cpu01"}), "gpu-[1-3,7],cpu01");
  EXPECT_EQ(CompressHostlist({"n3", "n1", "n2", "n2"}), "n[1-3]");
  EXPECT_EQ(CompressHostlist({"n01", "n02", "n03", "n10"}), "n[01-03,10]");
  EXPECT_EQ(CompressHostlist({"n8", "n9", "n10"}), "n[8-10]");
  EXPECT_EQ(CompressHostlist({"n08", "n09", "n10"}), "n[08-10]");
  EXPECT_EQ(CompressHostlist({"n1", "n01"}), "n[1,01]");
  EXPECT_EQ(CompressHostlist({"login", "n5", "login"}), "login,n5");
  EXPECT_EQ(CompressHostlist({"rack1-n01", "rack1-n02", "rack2-n01"}), "rack1-n[01-02],rack2-n01");
  EXPECT_EQ(CompressHostlist({"1", "2"}), "[1-2]");
  EXPECT_EQ(CompressHostlist({}), "");
}

TEST(CompressHostlist, ExpandsBackToTheSameHosts) {
  for (const char* expr : {"gpu-[1-3,7],cpu01", "n[08-10,12,099-101]", "rack[1-3]-n[01-04]",
                           "a,b,c[1-2]", "x[0-0],x[00-01]"}) {
    Hosts hosts = Expand(expr);
    Hosts back = Expand(CompressHostlist(hosts));
    std::sort(hosts.begin(), hosts.end());
    hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
    std::sort(back.begin(), back.end());
    EXPECT_EQ(back, hosts) << expr << " -> " << CompressHostlist(Expand(expr));
  }
}

}  // namespace
}  // namespace gantry::autoscale
