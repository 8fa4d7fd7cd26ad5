// A Table stored as column arrays in an HDF5 file (report.h5): types chosen per column,
// empty cells kept, column order and notes kept, through a real file.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "prism/error.h"
#include "prism/store/result_file.h"
#include "prism/store/table_group.h"
#include "support.h"

using namespace prism;
using prism::test::TempDir;

TEST_CASE("table group: a table round-trips through an HDF5 file column by column", "[store][table_group]") {
  Table t;
  t.columns = {"n", "loss", "name", "mixed", "a/b"};
  t.add({int64_t{1}, 4.5, std::string("uniform"), int64_t{3}, std::monostate{}});
  t.add({int64_t{-2}, std::monostate{}, std::string("1x2,4x4"), std::string("x"), 0.25});
  t.add({int64_t{1} << 40, std::numeric_limits<double>::quiet_NaN(), std::string(""), 1.5, int64_t{7}});
  t.notes = {"one run left out"};
  ResultGroup g;
  put_table(g, "final_loss", t);
  Table empty;
  empty.columns = {"x"};
  put_table(g, "none", empty);
  CHECK(g.at("final_loss/n", "t").type == ResultArray::Type::Int64);
  CHECK(g.at("final_loss/loss", "t").type == ResultArray::Type::Float64);
  CHECK(g.at("final_loss/name", "t").type == ResultArray::Type::String);
  CHECK(g.at("final_loss/mixed", "t").type == ResultArray::Type::String);
  CHECK(g.at("final_loss/a_b", "t").type == ResultArray::Type::Float64);
  CHECK(g.strings("final_loss/mixed", "t") == std::vector<std::string>{"3", "x", "1.5"});
  CHECK_THROWS_AS(put_table(g, "final_loss", t), Error);
  CHECK_THROWS_AS(put_table(g, "a/b", t), Error);

  TempDir dir("prism-table-group");
  const std::string path = dir.file("report.h5");
  write_result_file(path, g);
  const ResultGroup back = read_result_file(path);
  const Table r = get_table(back, "final_loss", path);
  CHECK(r.columns == t.columns);
  CHECK(r.notes == t.notes);
  REQUIRE(r.rows.size() == 3);
  CHECK(std::get<int64_t>(r.rows[2][0]) == int64_t{1} << 40);
  CHECK(std::get<double>(r.rows[0][1]) == 4.5);
  CHECK(std::holds_alternative<std::monostate>(r.rows[1][1]));
  CHECK(std::holds_alternative<std::monostate>(r.rows[2][1]));
  CHECK(std::get<std::string>(r.rows[1][2]) == "1x2,4x4");
  CHECK(std::get<double>(r.rows[2][4]) == 7.0);
  CHECK(to_csv(get_table(back, "none", path)) == "x\n");
  CHECK_THROWS_AS(get_table(back, "missing", path), Error);
}
