#pragma once
// What a pipeline fuzzer accepts from the engine on a well-formed case (fuzz_case_builder.hpp): a
// result, or an error the lowbit command prints as one line with exit 2. Those are std::runtime_error
// (CaseError and every message written for a user) and std::invalid_argument (the engine's refusal of
// a parameter or a shape: layout.hpp, the COAT formats). Every other exception means a path that
// checks nothing and was stopped by a library by luck: std::out_of_range (vector::at,
// vector::_M_range_check), std::length_error, std::bad_alloc, the other std::logic_errors, nlohmann's
// type_error and out_of_range (a param of the wrong type read with get<>()), std::bad_function_call,
// std::bad_optional_access. Those print their message and abort(), so that libFuzzer reports them.
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <typeinfo>

namespace lowbit::fuzz {

[[noreturn]] inline void unchecked_path(const char* stage, const std::exception& e) {
  int status = 0;
  const char* mangled = typeid(e).name();
  std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  std::fprintf(stderr, "%s: unchecked path: %s: %s\n", stage, status == 0 ? name.get() : mangled, e.what());
  std::abort();
}

// Runs `step`; returns whether it finished without an exception (false: a clean refusal).
template <class F>
bool clean_outcome(const char* stage, F&& step) {
  try {
    step();
    return true;
  } catch (const nlohmann::json::exception& e) {
    unchecked_path(stage, e);
  } catch (const std::invalid_argument&) {
    return false;
  } catch (const std::logic_error& e) {
    unchecked_path(stage, e);
  } catch (const std::runtime_error&) {
    return false;
  } catch (const std::exception& e) {
    unchecked_path(stage, e);
  }
}

}  // namespace lowbit::fuzz
