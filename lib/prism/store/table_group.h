#pragma once
// A Table as arrays of a ResultGroup, so the tables a report writes as CSV also
// land in an HDF5 file (report.h5) that h5py and pandas read column by column:
//   /<table>/<column>   one array per column, one element per row
//   /<table>/_columns   the column names in table order (a column's array name
//                       has '/' replaced by '_'; _columns keeps the name as is)
//   /<table>/_notes     the table's notes (what was left out and why)
// A column of integers only is int64; a column of numbers (integers, reals and
// empty cells) is float64 with NaN for an empty cell; any other column is
// strings, each cell as the CSV writes it (an empty cell is "").
#include <string>

#include "prism/store/result_group.h"
#include "prism/store/table.h"

namespace prism {

// Adds `table` under `name` (no '/'); throws prism::Error if `name` is taken.
void put_table(ResultGroup& group, const std::string& name, const Table& table);

// The table `name` back (numbers as int64 or double cells, NaN as an empty
// cell, strings as strings); throws prism::Error naming `where` if it is absent.
Table get_table(const ResultGroup& group, const std::string& name, const std::string& where);

}  // namespace prism
