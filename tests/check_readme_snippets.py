#!/usr/bin/env python3
"""Compiles every C++ snippet of README.md against the headers, as written.

Usage: check_readme_snippets.py README.md COMPILER [ARG ...]
(the compiler with its standard, include directories and warnings)

A snippet shows a few lines out of a user's program, so each one gets the
scaffold that program would have: the function it stands in, the names it
uses but does not declare (a pointer and size, a `fail` of the user's), and
what it leaves unused. The snippet's own lines are pasted in unchanged, and
what the scaffold adds is not indented (the snippets stand at column 0, and
GCC's -Wmisleading-indentation reads the two together).

A snippet is matched to its scaffold by text only it holds. A snippet that
matches none, or two, fails the test, as does a scaffold that no snippet
matches (a snippet was removed or changed past recognition): a README
snippet cannot go unchecked. Each is compiled with -fsyntax-only and the
project's warnings as errors (runtime ones also with -fno-exceptions
-fno-rtti, as a delegate builds), so a renamed call, a changed signature or
a type that no longer converts fails here before a user copies it. With
WDEDUP_SNIPPETS_M32=1 in the environment the runtime ones are compiled
again with -m32, as an armv7 or i386 delegate builds them: a 64-bit file
size that a snippet narrows into a 32-bit size_t fails -Wconversion there.
"""
import os
import re
import subprocess
import sys
import tempfile

# meson.build's warning_level=3, as errors (tests/meson.build passes its
# strict warnings with the compiler).
FLAGS = ['-fsyntax-only', '-Wall', '-Wextra', '-Wpedantic', '-Werror']
RUNTIME_FLAGS = ['-fno-exceptions', '-fno-rtti']


def split_includes(body):
    """The snippet's #include lines (hoisted to file scope) and the rest."""
    inc = [l for l in body.split('\n') if l.startswith('#include')]
    rest = [l for l in body.split('\n') if not l.startswith('#include')]
    return '\n'.join(inc), '\n'.join(rest)


def build_time(body):
    inc, rest = split_includes(body)
    return f"""#include <cstddef>
#include <cstdio>
{inc}
int snippet(const void* ptr, std::size_t size) {{
{rest}
(void)written;
return 0;
}}
"""


def import_ptd(body):
    return f"""#include <cstdio>
#include <wdedup/import.hpp>
int snippet() {{
{body}
return 0;
}}
"""


def runtime(body):
    inc, rest = split_includes(body)
    return f"""#include <cstddef>
#include <cstdint>
{inc}
int fail(const wdedup::Failure& f);
int snippet(std::uint8_t* dst, std::size_t dst_size) {{
{rest}
return 0;
}}
"""


def build_index(body):
    # The snippet includes <vector> itself: the runtime headers do not.
    inc, rest = split_includes(body)
    return f"""#include <cstdint>
#include <wdedup/runtime.hpp>
{inc}
void snippet(wdedup::Result<wdedup::NamedDataMap>& map) {{
{rest}
(void)st;
}}
"""


def freeable_buffer(body):
    *lines, last = body.split('\n')
    statements = '\n'.join(lines)
    # ExecuTorch's FreeableBuffer (runtime/core/freeable_buffer.h): its
    # constructor from a pointer, a size, a FreeFn and that function's context.
    return f"""#include <cstddef>
#include <cstdlib>
#include <wdedup/runtime.hpp>
class FreeableBuffer {{
 public:
  using FreeFn = void (*)(void* context, void* data, size_t size);
  FreeableBuffer(const void* data, size_t size, FreeFn free_fn, void* free_fn_context = nullptr)
      : data_(data), size_(size), free_fn_(free_fn), context_(free_fn_context) {{}}
  const void* data_;
  size_t size_;
  FreeFn free_fn_;
  void* context_;
}};
FreeableBuffer snippet(wdedup::DataBuffer b) {{
{statements}
return {last};
}}
"""


def policy(body):
    *lines, last = body.rstrip().split('\n')
    declarations = '\n'.join(lines)
    return f"""#include <cstddef>
#include <cstdint>
#include <string>
#include <wdedup/wdedup.hpp>
{declarations}
void snippet(const wdedup::Program& program) {{
{last}
(void)r;
}}
"""


def temporary_watch(body):
    inc, rest = split_includes(body)
    # File scope up to the options, which the user's writing function sets.
    at = rest.index('wdedup::WriteOptions options;')
    return f"""{inc}
{rest[:at]}
int snippet(const wdedup::Expected<wdedup::DedupResult>& result) {{
{rest[at:]}
(void)written;
return 0;
}}
"""


def moved_segments(body):
    # A source the user opened (an MmapSource, as in the runtime snippet).
    return f"""#include <wdedup/runtime.hpp>
void snippet(wdedup::Result<wdedup::MmapSource>& src) {{
{body}
(void)map;
}}
"""


def failed_result_handler(body):
    # ExecuTorch's ET_LOG (runtime/platform/log.h) as a printf-like stand-in.
    return f"""#include <cstdio>
#include <wdedup/runtime.hpp>
#define ET_LOG(level, ...) std::fprintf(stderr, __VA_ARGS__)
void snippet() {{
{body}
}}
"""


def file_window(body):
    # What AAsset_openFileDescriptor64 gives: a descriptor, and off64_t start and length.
    return f"""#include <cstdint>
#include <unistd.h>
#include <wdedup/runtime.hpp>
int fail(const wdedup::Failure& f);
int snippet(int fd, long long start, long long length) {{
{body}
return 0;
}}
"""


# (name, text only that snippet holds, scaffold, extra flags)
SCAFFOLDS = [
    ('build-time use', 'deduplicate<wdedup::Strategy<wdedup::OneBlob>>', build_time, []),
    ('importing .ptd files', 'wdedup::PtdFiles files;', import_ptd, []),
    ('at runtime', 'wdedup::MmapSource::open("model.ptd")', runtime, RUNTIME_FLAGS),
    ('an index for a file without one', 'map->build_index(', build_index, RUNTIME_FLAGS),
    ('a FreeableBuffer from a DataBuffer', 'FreeableBuffer(p, n,', freeable_buffer, RUNTIME_FLAGS),
    ('a policy of your own', 'struct MyPolicy', policy, []),
    ('removing the temporary file on a signal', 'options.on_temporary =', temporary_watch, []),
    ('a file whose segments moved', 'options.allow_moved_segments = true;', moved_segments, RUNTIME_FLAGS),
    ('a handler before the trap', 'wdedup::set_failed_result_handler(', failed_result_handler, RUNTIME_FLAGS),
    ('a window of a descriptor', 'MappedFile::from_fd(', file_window, RUNTIME_FLAGS),
]


def main():
    readme, compiler = sys.argv[1], sys.argv[2:]
    text = open(readme, encoding='utf-8').read()
    snippets = re.findall(r'^```cpp\n(.*?)\n```$', text, re.S | re.M)
    failures = []
    used = {name: 0 for name, *_ in SCAFFOLDS}
    for body in snippets:
        first = body.strip().split('\n')[0]
        matches = [s for s in SCAFFOLDS if s[1] in body]
        if len(matches) != 1:
            failures.append(f'README snippet starting {first!r} matches {len(matches)} scaffolds '
                            f'({", ".join(m[0] for m in matches) or "none"}): give it exactly one here')
            continue
        name, _, scaffold, extra = matches[0]
        used[name] += 1
        with tempfile.NamedTemporaryFile('w', suffix='.cpp', delete=False) as f:
            f.write(scaffold(body))
            path = f.name
        m32 = extra == RUNTIME_FLAGS and os.environ.get('WDEDUP_SNIPPETS_M32') == '1'
        targets = [[]] + ([['-m32']] if m32 else [])
        try:
            for target in targets:
                cmd = compiler + FLAGS + extra + target + [path]
                run = subprocess.run(cmd, capture_output=True, text=True)
                if run.returncode != 0:
                    failures.append(f'README snippet "{name}" (starting {first!r}) does not compile:\n'
                                    f'{" ".join(cmd)}\n{run.stdout}{run.stderr}')
                else:
                    print(f'ok: {name}{" (" + " ".join(target) + ")" if target else ""}')
        finally:
            os.unlink(path)
    for name, n in used.items():
        if n != 1:
            failures.append(f'scaffold "{name}" matched {n} README snippets, not 1')
    if not snippets:
        failures.append(f'no ```cpp snippets found in {readme}')
    for f in failures:
        print('FAIL: ' + f)
    print(f'{len(snippets)} snippets, {len(failures)} failures')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
