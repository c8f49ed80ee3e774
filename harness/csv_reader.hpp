// fast-cpp-csv-parser, included with its one known warning silenced (a strncpy inside the
// library's header that GCC flags at -Wall). Tests read CSV back through it.
#pragma once
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-truncation"
#include <libfccp/csv.h>
#pragma GCC diagnostic pop
