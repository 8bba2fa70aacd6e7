// Tests for detail/flat_index.hpp: FlatIndex, the map from a pair of 64-bit
// words to a 32-bit value (size classes, pointers, hash buckets), used by
// the store and the identity engine. It grows on its own where a caller
// did not size it (NamedDataStore's merge fills one unreserved, and
// refresh_buffer_index more pairs than it is reset for); a lookup of a
// missing pair ends at an empty slot, so the map must never fill. (IdIndex
// and HashAhead: tests/name_index.cpp.)
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdint>
#include <utility>

#include "wdedup/detail/flat_index.hpp"

using wdedup::detail::FlatIndex;

namespace {
constexpr std::uint32_t kNone = FlatIndex::kNone;

/// Pair i: (i, 7i + 1), stored as value i + 100.
std::uint64_t b_of(std::uint64_t i) { return 7 * i + 1; }

/// Inserts pairs first .. end - 1 into `m`.
void insert_pairs(FlatIndex& m, std::uint64_t first, std::uint64_t end) {
  bool inserted = false;
  for (std::uint64_t i = first; i < end; ++i) (void)m.find_or_insert(i, b_of(i), static_cast<std::uint32_t>(i + 100), inserted);
}

/// Stops the process if the lookups that follow do not return: a map with
/// no empty slot left probes a missing pair forever.
struct Deadline {
  Deadline() { ::alarm(30); }
  ~Deadline() { ::alarm(0); }
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;
};
}  // namespace

TEST_CASE("FlatIndex: grown from nothing, never sized, it keeps every pair and finds no other") {
  const Deadline deadline;
  FlatIndex m;
  CHECK(m.find(1, 2) == kNone);  // no slots yet
  bool inserted = false;
  // 16 pairs: as many as its first table has slots. It doubles at the
  // ninth; one that did not (or only once full) had no empty slot left
  // for the lookups of missing pairs below to end at.
  for (std::uint64_t i = 0; i < 16; ++i) {
    CAPTURE(i);
    CHECK(m.find_or_insert(i, b_of(i), static_cast<std::uint32_t>(i + 100), inserted) == i + 100);
    CHECK(inserted);
  }
  CHECK(m.find(99, 99) == kNone);
  CHECK(m.find(3, b_of(3) + 1) == kNone);  // the same first word, another second
  CHECK(m.find(4, b_of(3)) == kNone);      // the same second word, another first
  CHECK(m.find_or_insert(5, b_of(5), 999, inserted) == 105);  // present: its value, not the one given
  CHECK_FALSE(inserted);
  // On to 1,000 pairs (six more doublings): each keeps its value.
  for (std::uint64_t i = 16; i < 1000; ++i) (void)m.find_or_insert(i, b_of(i), static_cast<std::uint32_t>(i + 100), inserted);
  std::size_t found = 0;
  for (std::uint64_t i = 0; i < 1000; ++i) found += m.find(i, b_of(i)) == i + 100;
  CHECK(found == 1000);
  CHECK(m.find(1000, b_of(1000)) == kNone);
}

TEST_CASE("FlatIndex: reset empties it; a moved-from map is empty and usable, the moved-to one finds every pair") {
  const Deadline deadline;
  FlatIndex m;
  bool inserted = false;
  for (std::uint64_t i = 0; i < 40; ++i) (void)m.find_or_insert(i, b_of(i), static_cast<std::uint32_t>(i + 100), inserted);
  // Moved into a map that has no slots yet, and into one that has its own.
  FlatIndex built(std::move(m));
  FlatIndex assigned;
  assigned = std::move(built);
  FlatIndex sized;
  sized.reset(4);
  (void)sized.find_or_insert(1000, 0, 7, inserted);
  FlatIndex copy = assigned;
  sized = std::move(copy);
  for (const FlatIndex* to : {&assigned, &sized}) {
    std::size_t found = 0;
    for (std::uint64_t i = 0; i < 40; ++i) found += to->find(i, b_of(i)) == i + 100;
    CHECK(found == 40);
    CHECK(to->find(1000, 0) == kNone);
    CHECK(to->find(40, b_of(40)) == kNone);
  }
  for (FlatIndex* from : {&m, &built}) {
    CHECK(from->find(3, b_of(3)) == kNone);
    CHECK(from->find_or_insert(3, b_of(3), 5, inserted) == 5);
    CHECK(inserted);
    CHECK(from->find(3, b_of(3)) == 5);
  }
  assigned.reset(100);
  CHECK(assigned.find(3, b_of(3)) == kNone);
  for (std::uint64_t i = 0; i < 100; ++i) (void)assigned.find_or_insert(i, 0, static_cast<std::uint32_t>(i), inserted);
  CHECK(assigned.find(99, 0) == 99);
  CHECK(assigned.find(100, 0) == kNone);
}

TEST_CASE("FlatIndex: pairs that share one word are different pairs; (0, 0) is a pair like any other") {
  const Deadline deadline;
  FlatIndex m;
  bool inserted = false;
  // 40 pairs with first word 7 and 40 with second word 7, in one table: a
  // probe that compared one word took another's value for its own (a lookup
  // or an insert stopping at the first pair with the same first word).
  for (std::uint32_t j = 0; j < 40; ++j) {
    CAPTURE(j);
    CHECK(m.find_or_insert(7, j, 200 + j, inserted) == 200 + j);
    CHECK(inserted);
    CHECK(m.find_or_insert(1000 + j, 7, 300 + j, inserted) == 300 + j);
    CHECK(inserted);
  }
  std::size_t found = 0, missing = 0;
  for (std::uint32_t j = 0; j < 40; ++j) {
    found += m.find(7, j) == 200 + j;
    found += m.find(1000 + j, 7) == 300 + j;
    missing += m.find(7, 40 + j) == kNone;
    missing += m.find(1040 + j, 7) == kNone;
  }
  CHECK(found == 80);
  CHECK(missing == 80);
  // An empty slot holds the words (0, 0): the pair (0, 0) is not found in
  // one, it is inserted there.
  CHECK(m.find(0, 0) == kNone);
  CHECK(m.find_or_insert(0, 0, 5, inserted) == 5);
  CHECK(inserted);
  CHECK(m.find(0, 0) == 5);
  CHECK(m.find_or_insert(0, 0, 6, inserted) == 5);
  CHECK_FALSE(inserted);
}

TEST_CASE("FlatIndex: moved onto itself, a map keeps every pair") {
  const Deadline deadline;
  FlatIndex m;
  insert_pairs(m, 0, 40);
  FlatIndex& same = m;  // (as a swap or a container's shuffle does it)
  m = std::move(same);
  std::size_t found = 0;
  for (std::uint64_t i = 0; i < 40; ++i) found += m.find(i, b_of(i)) == i + 100;
  CHECK(found == 40);
  CHECK(m.find(40, b_of(40)) == kNone);
}

#if defined(__cpp_exceptions)
// Allocations seen by a replaced operator new that throws when armed
// (support/failing_new.hpp): only where exceptions are on.
#include <new>

#include "support/failing_new.hpp"

namespace {
/// Inserts pairs first .. first + count - 1 (pair i: (i, b_of(i)), value
/// i + 100) with every operator new armed to throw: whether one allocated.
bool insert_allocates(FlatIndex& m, std::uint64_t first, std::uint64_t count) {
  bool threw = false;
  wdedup_test::g_fail_countdown = 0;
  try {
    insert_pairs(m, first, first + count);
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  wdedup_test::g_fail_countdown = -1;
  return threw;
}
}  // namespace

TEST_CASE("FlatIndex: reset(n) and reserve(n) make room for n pairs: n inserts allocate nothing and keep every pair") {
  const Deadline deadline;
  // 100 pairs need 256 slots (at most half full): a table of 128 grew at
  // the 65th insert. After reset(8) (16 slots, 8 pairs) every lookup of a
  // missing pair walks to an empty slot, some past the table's last slot,
  // whose index must exist (ASan sees a table one slot short).
  FlatIndex reset;
  reset.reset(100);
  CHECK_FALSE(insert_allocates(reset, 0, 100));
  FlatIndex reserved;
  reserved.reserve(100);
  CHECK_FALSE(insert_allocates(reserved, 0, 100));
  FlatIndex small;
  small.reset(8);
  CHECK_FALSE(insert_allocates(small, 0, 8));
  for (const FlatIndex* m : {&reset, &reserved, &small}) {
    const std::uint64_t n = m == &small ? 8 : 100;
    std::size_t found = 0, missing = 0;
    for (std::uint64_t i = 0; i < n; ++i) found += m->find(i, b_of(i)) == i + 100;
    for (std::uint64_t i = n; i < n + 1000; ++i) missing += m->find(i, b_of(i)) == kNone;
    CHECK(found == n);
    CHECK(missing == 1000);
  }
  // The ninth pair of the small one grows it: the map is never full.
  CHECK(insert_allocates(small, 8, 1));
}

TEST_CASE("FlatIndex: a moved-from map counts from 0: its first table, 16 slots, takes 8 pairs") {
  // Its count goes with its slots: one that kept the 40 pairs it had
  // counted grew its 16 slots at its second insert, and again at each one
  // after until the table was twice its stale count.
  const Deadline deadline;
  FlatIndex m;
  insert_pairs(m, 0, 40);
  FlatIndex built(std::move(m));
  FlatIndex assigned;
  assigned = std::move(built);
  bool inserted = false;
  for (FlatIndex* from : {&m, &built}) {
    CHECK(from->find_or_insert(0, b_of(0), 100, inserted) == 100);  // (its first table: an allocation)
    CHECK(inserted);
    CHECK_FALSE(insert_allocates(*from, 1, 7));
    std::size_t found = 0;
    for (std::uint64_t i = 0; i < 8; ++i) found += from->find(i, b_of(i)) == i + 100;
    CHECK(found == 8);
  }
  CHECK(assigned.find(39, b_of(39)) == 139);
}
#endif  // __cpp_exceptions
