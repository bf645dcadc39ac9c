#include "gantry/core/table.h"

#include <gtest/gtest.h>

namespace gantry {
namespace {

TEST(TableTest, AlignsColumnsAndUnderlinesHeader) {
  Table t({"check", "value", "verdict"});
  t.AddRow({"memory", "23.4 GiB", "ok"});
  t.AddRow({"gpu", "0", "missing"});
  EXPECT_EQ(t.rows(), 2u);
  EXPECT_EQ(t.Render(),
            "check   value     verdict\n"
            "------  --------  -------\n"
            "memory  23.4 GiB  ok\n"
            "gpu     0         missing\n");
}

TEST(TableTest, RightAlignedColumns) {
  Table t({"size", "time"});
  t.SetAlign(0, Table::Align::kRight);
  t.SetAlign(1, Table::Align::kRight);
  t.AddRow({"8", "12.5"});
  t.AddRow({"1048576", "3"});
  EXPECT_EQ(t.Render(),
            "   size  time\n"
            "-------  ----\n"
            "      8  12.5\n"
            "1048576     3\n");
}

TEST(TableTest, WidthCountsUtf8CodePointsNotBytes) {
  Table t({"unit", "x"});
  t.AddRow({"µs", "1"});  // 'µ' is two bytes, one column
  t.AddRow({"ms", "2"});
  EXPECT_EQ(t.Render(),
            "unit  x\n"
            "----  -\n"
            "µs    1\n"
            "ms    2\n");
  Table wide({"a"});
  wide.AddRow({"°C°C°"});
  EXPECT_EQ(wide.Render(), "a\n-----\n°C°C°\n");
}

TEST(TableTest, ShortRowsArePaddedWithEmptyCells) {
  Table t({"a", "b", "c"});
  t.SetAlign(2, Table::Align::kRight);
  t.AddRow({"x"});
  EXPECT_EQ(t.Render(),
            "a  b  c\n"
            "-  -  -\n"
            "x\n");
}

TEST(TableTest, HeaderOnly) {
  Table t({"name"});
  EXPECT_EQ(t.rows(), 0u);
  EXPECT_EQ(t.Render(), "name\n----\n");
}

}  // namespace
}  // namespace gantry
