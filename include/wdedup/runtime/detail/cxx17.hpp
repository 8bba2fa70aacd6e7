// wdedup/runtime/detail/cxx17.hpp — refuses a language standard before
// C++17 with one line that says so. Without it, -std=c++14 stops on what
// C++17 added (std::string_view, std::align_val_t, inline variables) with
// errors that name our code, not the flag. Every public header includes it
// before anything else, so its error comes first whatever order a compiler
// reports in. MSVC reports 199711L in __cplusplus unless built with
// /Zc:__cplusplus; _MSVC_LANG is its real standard.
#ifndef WDEDUP_RUNTIME_DETAIL_CXX17_HPP
#define WDEDUP_RUNTIME_DETAIL_CXX17_HPP

#if defined(_MSVC_LANG)
#if _MSVC_LANG < 201703L
#error "wdedup needs C++17 or later (/std:c++17)"
#endif
#elif __cplusplus < 201703L
#error "wdedup needs C++17 or later (-std=c++17)"
#endif

#endif  // WDEDUP_RUNTIME_DETAIL_CXX17_HPP
