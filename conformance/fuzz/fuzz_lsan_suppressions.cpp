// LeakSanitizer suppressions linked into the fuzz executables. clang 14 does not destroy the old value
// when a json member is assigned a braced list holding a temporary with a destructor inside a
// function template (cast_format<Format> in formats_fp8.cpp: 48 bytes per FP8 format, once per
// process, when the registry is built); GCC does, so the sanitize preset sees no leak. Reproduced in
// four lines: template <class T> void f(int x) { nlohmann::json j = nlohmann::json::object();
// j = {{"k", std::string(x ? "a" : "b")}}; } leaks 48 bytes under clang++-14 -fsanitize=address.
extern "C" const char* __lsan_default_suppressions() { return "leak:lowbit::register_fp8_formats\n"; }
