# SPDX-FileCopyrightText: 2026 The kvrelay Authors
#
# SPDX-License-Identifier: Apache-2.0
#
# cmake -DIN=page.html -DOUT=page.cpp -P embed_page.cmake: writes a C++ file defining
# kvrelay::admin_page_html() as the page's bytes (a raw string literal; the page never contains
# its closing delimiter, which is checked here).
file(READ "${IN}" page)
string(FIND "${page}" ")kvrelay_page\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw string delimiter )kvrelay_page\"")
endif()
file(WRITE "${OUT}.tmp"
  "// Generated from admin/admin_page.html by admin/embed_page.cmake; do not edit.\n"
  "#include \"admin/admin_page.hpp\"\n\n"
  "namespace kvrelay {\n\n"
  "std::string_view admin_page_html() {\n"
  "  static constexpr char page[] = R\"kvrelay_page(${page})kvrelay_page\";\n"
  "  return {page, sizeof page - 1};\n"
  "}\n\n"
  "}  // namespace kvrelay\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
