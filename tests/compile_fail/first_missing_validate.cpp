// Must not compile: the policy has its name and nothing else. Of the
// static_asserts for the members it lacks (validate, blob_key,
// function_name) only the first fires, the one about `validate`: each later
// one holds while an earlier member is missing.
#include <wdedup/wdedup.hpp>

struct NameOnly {
  static constexpr const char* name = "NAME_ONLY";
};

int main() {
  wdedup::Program p;
  auto r = wdedup::deduplicate<wdedup::Strategy<NameOnly>>(p);
  return r.ok() ? 0 : 1;
}
