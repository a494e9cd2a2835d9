# Writes OUT, a C++ file defining `std::string_view NAME()` that returns the bytes of IN.
file(READ ${IN} content)
set(delim "dtrain_embedded")
file(WRITE ${OUT} "#include <string_view>\nnamespace dtrain {\nstd::string_view ${NAME}() {\n  static const char text[] = R\"${delim}(${content})${delim}\";\n  return std::string_view(text, sizeof(text) - 1);\n}\n}  // namespace dtrain\n")
