// benchmarks/build_cost_bench.cpp — what including wdedup costs a user's
// build: `CXX -std=c++17 -fsyntax-only` of a TU that includes one header
// (or every header), minus the same for an empty TU, median of several compilations
// (interleaved, rotating order). The figure is the compiler's CPU time
// (user + system, from wait4): on a machine shared with other jobs the wall
// time also counts waiting for a core. The wall-clock medians are in the JSON.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <wdedup/bench.hpp>

#include "harness.hpp"
#include "timed_run.hpp"

namespace wbench {
namespace {

namespace bench = wdedup::bench;

bool write_file(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  return std::fclose(f) == 0 && ok;
}

/// What the command that failed to start said (a --cxx that is not there).
std::string spawn_note(const RunTime& t) {
  return t.spawn_error != 0 ? std::string(": cannot start it: ") + std::strerror(t.spawn_error) : std::string();
}

}  // namespace

std::string check_build(const Config& c) {
  // The headers are there, and --cxx compiles an empty C++17 TU: refused
  // before the run, not after minutes of the other groups.
  const std::string probe = c.include_dir + "/wdedup/runtime.hpp";
  if (::access(probe.c_str(), R_OK) != 0)
    return "--include-dir " + c.include_dir + ": no readable " + probe + " (" + std::strerror(errno) + ")";
  const RunTime t = timed_run({c.cxx, "-std=c++17", "-fsyntax-only", "-x", "c++", "/dev/null"}, "/dev/null");
  if (t.cpu < 0)
    return "--cxx " + c.cxx + ": `" + c.cxx + " -std=c++17 -fsyntax-only -x c++ /dev/null` failed" +
           (t.spawn_error != 0 ? spawn_note(t) : std::string(" (a compiler taking -std=c++17 and -fsyntax-only is needed)"));
  return "";
}

void run_build_cost(const Config& c, Results& out) {
  struct Tu {
    const char* label;                 ///< nullptr: the empty TU
    std::vector<const char*> headers;  ///< what it includes
    double target;                     ///< seconds over empty; 0: none
    std::string path;
    std::vector<double> samples, wall;
  };
  // "Every public header": the umbrella leaves out the harness's bench.hpp
  // and the runtime's verify.hpp, which a program includes on its own. (The
  // row's note names the three: a label that listed them made a name of 106
  // characters, which pushed its line's columns past the table's.)
  std::vector<Tu> tus = {
      {nullptr, {}, 0, {}, {}, {}},
      {"<wdedup/runtime.hpp>", {"wdedup/runtime.hpp"}, 0.15, {}, {}, {}},
      {"every public header", {"wdedup/wdedup.hpp", "wdedup/bench.hpp", "wdedup/runtime/verify.hpp"}, 1.0, {}, {}, {}},
      {"<wdedup/wdedup.hpp>", {"wdedup/wdedup.hpp"}, 0, {}, {}, {}},
      {"<wdedup/ptd_writer.hpp>", {"wdedup/ptd_writer.hpp"}, 0, {}, {}, {}},
      {"<wdedup/bench.hpp>", {"wdedup/bench.hpp"}, 0, {}, {}, {}}};
  // (The two targets are counted before the run by planned_targets,
  // targets.hpp.)
  if (c.quick) tus.resize(3);  // CI: the two TUs with targets
  const std::string log = temp_path(c, "compile.log");
  for (std::size_t i = 0; i < tus.size(); ++i) {
    Tu& t = tus[i];
    t.path = temp_path(c, "build_cost_tu" + std::to_string(i) + ".cpp");
    std::string text;
    for (const char* h : t.headers) text += "#include <" + std::string(h) + ">\n";
    if (!write_file(t.path, text)) {
      // A failure, not an empty group: "0 of 0 targets met" and exit 0
      // would read as a run with nothing to say.
      report_failure("cannot write " + t.path + ": " + std::strerror(errno) + ": no build-cost figures");
      for (const Tu& w : tus)
        if (!w.path.empty()) ::unlink(w.path.c_str());
      return;
    }
  }
  auto compile = [&](const Tu& t) {
    return timed_run({c.cxx, "-std=c++17", "-fsyntax-only", "-I", c.include_dir, t.path}, log);
  };
  bool failed = false;
  auto fail = [&](const Tu& t, const RunTime& r) {
    report_failure("`" + c.cxx + " -std=c++17 -fsyntax-only -I " + c.include_dir + " " + t.path + "` failed" +
                   (r.spawn_error != 0 ? spawn_note(r) : " (see " + log + ")") + ": no build-cost figures");
    failed = true;
  };
  // The empty TU's times compiled right beside each header (tus[0] is the
  // empty TU): each header's baseline.
  std::vector<std::vector<double>> beside(tus.size()), beside_wall(tus.size());
  // Warm (the compiler and the headers into the page cache), which also
  // checks that every TU compiles. --quick times the warm-up run itself.
  for (Tu& t : tus) {
    // (A line for it too: six compilations take a few seconds.)
    const char* label = t.label ? t.label : "empty TU";
    if (c.quick)  // (--quick times it: its first sample)
      progress(c, "build cost: %s, compilation 1/%u", label, c.compile_reps);
    else
      progress(c, "build cost: %s, warm-up compilation", label);
    const RunTime s = compile(t);
    if (s.cpu < 0) {
      fail(t, s);
      break;
    }
    if (!c.quick) continue;
    if (t.label) {
      t.samples.push_back(s.cpu);
      t.wall.push_back(s.wall);
    } else {
      for (std::size_t i = 1; i < tus.size(); ++i) {
        beside[i].push_back(s.cpu);
        beside_wall[i].push_back(s.wall);
      }
    }
  }
  // Every header is compiled next to an empty TU, before it in even
  // repetitions and after it in odd ones, so that a header and its
  // baseline see the same moment of a shared host.
  for (unsigned r = 0; !failed && r < (c.quick ? c.compile_reps - 1 : c.compile_reps); ++r)
    for (std::size_t i = 1; !failed && i < tus.size(); ++i)
      for (int step = 0; step < 2; ++step) {
        const bool header_now = (step == 1) == (r % 2 == 0);
        Tu& t = header_now ? tus[i] : tus[0];
        // (--quick's first sample was the warm-up compilation.)
        progress(c, "build cost: %s, compilation %u/%u", t.label ? t.label : "empty TU", r + (c.quick ? 2 : 1),
                 c.compile_reps);
        const RunTime s = compile(t);
        if (s.cpu < 0) {  // a failed compile is not a sample
          fail(t, s);
          break;
        }
        (header_now ? t.samples : beside[i]).push_back(s.cpu);
        (header_now ? t.wall : beside_wall[i]).push_back(s.wall);
      }
  if (!failed) {
    for (std::size_t i = 1; i < tus.size(); ++i) {
      const Tu& t = tus[i];
      const double empty = bench::median(beside[i]);
      Row w;
      w.group = "build";
      w.name = std::string("#include ") + t.label + " over empty TU";
      w.value = bench::median(t.samples) - empty;
      w.unit = "s";
      w.baseline = "empty TU";
      w.baseline_value = empty;
      w.baseline_unit = "s";
      w.reps = static_cast<unsigned>(t.samples.size());
      w.samples = t.samples;
      w.baseline_samples = beside[i];
      // Paired per repetition, like every other row's ratio; the target is
      // on the value.
      std::vector<double> paired;
      for (std::size_t r = 0; r < t.samples.size() && r < beside[i].size(); ++r)
        if (t.samples[r] > 0) paired.push_back(beside[i][r] / t.samples[r]);
      if (!paired.empty()) w.ratio = bench::median(paired);
      w.ratio_meaning = "empty TU's CPU time / this TU's, compiled beside it (below 1: the header's cost)";
      if (t.target > 0) {
        char text[32];
        std::snprintf(text, sizeof text, "<= %.2g s", t.target);
        w.target = Target::value_at_most(t.target, text);
      }
      w.extra = {{"wall_seconds_over_empty", bench::median(t.wall) - bench::median(beside_wall[i])},
                 {"wall_seconds_empty", bench::median(beside_wall[i])}};
      w.note = c.cxx + " -std=c++17 -fsyntax-only: median CPU time (user+sys) minus the empty TU's compiled beside it";
      if (t.headers.size() > 1) {
        w.note += "; the TU includes";
        for (std::size_t h = 0; h < t.headers.size(); ++h)
          w.note += std::string(h == 0 ? " <" : h + 1 == t.headers.size() ? " and <" : ", <") + t.headers[h] + ">";
      }
      out.rows.push_back(std::move(w));
    }
  }
  for (const Tu& t : tus) ::unlink(t.path.c_str());
  if (!failed) ::unlink(log.c_str());
}

}  // namespace wbench
