// Tests for detail/name_index.hpp: NameIndex hands out dense ids in order
// of first insertion and finds names exactly, whether they differ within
// the copied head (the first NameEntry::kHead characters), past it, or only
// in length; views are never read past their size.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "wdedup/detail/name_index.hpp"

using wdedup::detail::NameEntry;
using wdedup::detail::NameIndex;
using wdedup::detail::NameRef;

TEST_CASE("NameIndex: ids in order of first insertion; exact matches only") {
  static_assert(NameEntry::kHead == 12);
  // Each name in its own exact-size allocation (ASan catches a read past it).
  const std::vector<std::string> texts = {
      "w.1",                          // short: all in the head
      "w.12",                         // same start, longer
      "layers.0.attention.wq.weight", // long: the tail is past the head
      "layers.0.attention.wk.weight", // same head and length, differs past it
      "layers.0.attention.wq.weighT", // differs in the last character
      "abcdefghijkl",                 // exactly kHead characters
      "abcdefghijkm",                 // differs in the head's last character
      "abcdefghijkl.",                // one past the head
  };
  std::vector<std::unique_ptr<char[]>> owned;
  std::vector<std::string_view> names;
  for (const std::string& t : texts) {
    owned.emplace_back(new char[t.size()]);
    std::copy(t.begin(), t.end(), owned.back().get());
    names.emplace_back(owned.back().get(), t.size());
  }
  NameIndex index(4);  // grows past its first size: rehashes keep every id
  for (std::uint32_t i = 0; i < names.size(); ++i) {
    bool added = false;
    CHECK(index.find_or_add(names[i], &added) == i);
    CHECK(added);
  }
  CHECK(index.size() == names.size());
  for (std::uint32_t i = 0; i < names.size(); ++i) {
    bool added = true;
    CHECK(index.find_or_add(std::string(texts[i]), &added) == i);  // other memory, same text
    CHECK_FALSE(added);
    CHECK(index.find(texts[i]) == i);
    CHECK(index.name(i) == texts[i]);
    CHECK(index.name(i).data() == names[i].data());  // the view kept, not a copy
  }
  CHECK(index.find("w.") == NameIndex::kNone);
  CHECK(index.find("w.13") == NameIndex::kNone);
  CHECK(index.find("layers.0.attention.wv.weight") == NameIndex::kNone);
  CHECK(index.find("abcdefghijk") == NameIndex::kNone);
  CHECK(index.find("") == NameIndex::kNone);
  CHECK(index.find_or_add("") == names.size());  // the empty name is a name too
  CHECK(index.find(std::string_view()) == names.size());
  // Handed over, the index finds nothing; names stay.
  const wdedup::detail::IdIndex ids = index.release_index();
  CHECK(index.find("w.1") == NameIndex::kNone);
  CHECK(index.name(2) == "layers.0.attention.wq.weight");
}

TEST_CASE("NameIndex: every name keeps its id through the rehashes of growing from 16 slots to 4,096") {
  // The first case's names fit its first 16 slots until the empty name:
  // no lookup there follows a rehash. Here 2,000 names go through eight
  // (16 slots to 4,096), and each is then found under the id it was given.
  std::vector<std::string> texts;
  for (std::uint32_t i = 0; i < 2000; ++i) texts.push_back("layers." + std::to_string(i) + ".attention.wq.weight");
  NameIndex index(0);
  for (std::uint32_t i = 0; i < texts.size(); ++i) REQUIRE(index.find_or_add(texts[i]) == i);
  REQUIRE(index.size() == texts.size());
  std::size_t found = 0;
  for (std::uint32_t i = 0; i < texts.size(); ++i) found += index.find(texts[i]) == i;
  CHECK(found == texts.size());
  bool added = true;
  CHECK(index.find_or_add(texts[1234], &added) == 1234);
  CHECK_FALSE(added);
  CHECK(index.size() == texts.size());
  CHECK(index.find("layers.2000.attention.wq.weight") == NameIndex::kNone);
}

TEST_CASE("same_name: every character counts, in the copied head, at its last character and past it") {
  // The index compares names only when their hashes meet, so the test above
  // cannot steer two names that differ in one character into one
  // comparison: the comparison is checked on its own, for every character.
  constexpr std::size_t kHead = NameEntry::kHead;
  const std::string letters = "abcdefghijklmnopqrst";
  for (const std::size_t len : {std::size_t{1}, kHead - 1, kHead, kHead + 1, std::size_t{20}}) {
    CAPTURE(len);
    const std::string name = letters.substr(0, len);
    NameEntry e{};
    e.data = name.data();
    e.size = static_cast<std::uint32_t>(len);
    std::memcpy(e.head, name.data(), std::min(len, kHead));
    const NameRef r{&e};
    CHECK(same_name(r, name));
    CHECK(same_name(r, std::string(name)));  // the same text in other memory
    for (std::size_t i = 0; i < len; ++i) {
      CAPTURE(i);
      std::string other = name;
      other[i] = static_cast<char>(other[i] ^ 1);
      CHECK_FALSE(same_name(r, other));
    }
    CHECK_FALSE(same_name(r, name.substr(0, len - 1)));
    CHECK_FALSE(same_name(r, name + "u"));
  }
}

TEST_CASE("IdIndex hashes under a seed of its own: names chosen to collide under seed 0 spread out") {
  // 16,384 names whose seed-0 hashes all start in the first 256 of the
  // 32,768 slots an index sized for them has (what a hostile file's keys
  // would be): under seed 0 every insert walked one run of up to 16,384.
  using wdedup::detail::IdIndex;
  using wdedup::detail::key_hash;
  constexpr std::size_t kNames = 16384, kSlots = 2 * kNames;
  std::vector<std::string> names;
  for (std::uint64_t i = 0; names.size() < kNames; ++i) {
    std::string n = "layers." + std::to_string(i) + ".weight";
    if ((key_hash(n.data(), n.size(), 0) & (kSlots - 1)) < 256) names.push_back(std::move(n));
  }
  const IdIndex index(kNames), other(kNames);
  std::vector<char> used(kSlots, 0);
  std::size_t distinct = 0;
  for (const std::string& n : names) {
    const std::size_t slot = index.hash(n) & (kSlots - 1);
    distinct += used[slot] == 0;
    used[slot] = 1;
  }
  // A random seed puts them in ~12,900 distinct slots (1 - e^-0.5 of them);
  // seed 0 in at most 256.
  CHECK(distinct > 11000);
  // Each index draws its own seed (a fixed one, zero or not, gives two
  // indexes the same hashes); a copy or a move keeps it with the slots.
  CHECK(index.hash("w") == index.hash(std::string("w")));
  CHECK(index.hash("w") != other.hash("w"));
  IdIndex copy = index;
  CHECK(copy.hash("w") == index.hash("w"));
  IdIndex moved = std::move(copy);
  CHECK(moved.hash("w") == index.hash("w"));
  // And they work as names: each found under its own id.
  NameIndex ids(kNames);
  for (std::size_t i = 0; i < kNames; ++i) REQUIRE(ids.find_or_add(names[i]) == i);
  CHECK(ids.find(names[12345]) == 12345);
  CHECK(ids.find("layers.x.weight") == NameIndex::kNone);
  // A handed-over index finds by its own hash.
  const std::string_view probe = names[777];
  IdIndex handed = ids.release_index();
  auto name_of = [&](std::uint32_t id) { return ids.name(id); };
  CHECK(handed.find(probe, handed.hash(probe), name_of) == 777);
}

TEST_CASE("IdIndex::sharing_hash_with: an empty index that hashes as another; NameIndex::find by a caller's hash") {
  // deduplicate() hashes a generated key once for the name index and its
  // own index of keys: the two must hash alike, and find alike by it.
  using wdedup::detail::IdIndex;
  NameIndex names(16);
  const std::vector<std::string> texts = {"w.1", "decode/w.1", "layers.0.attention.wq.weight", ""};
  for (std::size_t i = 0; i < texts.size(); ++i) REQUIRE(names.find_or_add(texts[i]) == i);
  IdIndex keys = IdIndex::sharing_hash_with(names.index());
  const IdIndex own(16);
  for (const std::string& t : texts) {
    CAPTURE(t);
    CHECK(keys.hash(t) == names.hash(t));
  }
  // A new index draws a seed of its own; this one took the names' seed,
  // and no entry of theirs.
  CHECK(own.hash("w.1") != names.hash("w.1"));
  const std::vector<std::string> key_texts = {"decode/w.1", "prefill/w.1"};
  auto key_of = [&](std::uint32_t id) { return std::string_view(key_texts[id]); };
  CHECK(keys.find("decode/w.1", keys.hash("decode/w.1"), key_of) == IdIndex::kNone);
  // NameIndex finds by the caller's hash as by its own.
  for (std::size_t i = 0; i < texts.size(); ++i) CHECK(names.find(texts[i], keys.hash(texts[i])) == i);
  CHECK(names.find("w.2", keys.hash("w.2")) == NameIndex::kNone);
  // The keys' index takes ids of its own under the shared hash.
  keys.insert(key_texts[0], names.hash(key_texts[0]), 0, key_of);
  keys.insert(key_texts[1], names.hash(key_texts[1]), 1, key_of);
  CHECK(keys.find("decode/w.1", names.hash("decode/w.1"), key_of) == 0);
  CHECK(keys.find("prefill/w.1", names.hash("prefill/w.1"), key_of) == 1);
  CHECK(keys.find("w.1", names.hash("w.1"), key_of) == IdIndex::kNone);
}

TEST_CASE("NameIndex: a name of 70,000 characters keeps its whole size, through the rehashes that follow it") {
  // NameEntry holds a name's size in 32 bits: the size a name has past
  // 2^16 is kept whole, found by its whole text, and shown whole.
  std::string long_name(70000, 'w');
  long_name.back() = 'z';
  NameIndex index(0);
  bool added = false;
  CHECK(index.find_or_add(long_name, &added) == 0);
  CHECK(added);
  std::vector<std::string> others;  // kept: the index views them
  for (std::uint32_t i = 1; i <= 100; ++i) others.push_back("n." + std::to_string(i));
  for (std::uint32_t i = 1; i <= 100; ++i) REQUIRE(index.find_or_add(others[i - 1]) == i);  // 16 slots to 256
  CHECK(index.name(0).size() == 70000);
  CHECK(index.name(0).data() == long_name.data());
  CHECK(index.find(long_name) == 0);
  added = true;
  CHECK(index.find_or_add(std::string(long_name), &added) == 0);  // the same text in other memory
  CHECK_FALSE(added);
  CHECK(index.size() == 101);
}

TEST_CASE("IdIndex: two names under one hash are two names; the hash only steers the probe") {
  // A slot keeps 32 bits of its name's hash beside the id, and a probe
  // compares the names where those bits match: two names whose whole
  // hashes are equal (as any two may be) meet there, and only the names
  // tell them apart.
  using wdedup::detail::IdIndex;
  const std::vector<std::string> names = {"layers.0.wq", "layers.0.wk"};
  auto name_of = [&](std::uint32_t id) { return std::string_view(names[id]); };
  IdIndex index(0);
  const std::uint64_t h = index.hash(names[0]);
  index.insert(names[0], h, 0, name_of);
  CHECK(index.find(names[0], h, name_of) == 0);
  CHECK(index.find(names[1], h, name_of) == IdIndex::kNone);
  index.insert(names[1], h, 1, name_of);
  CHECK(index.find(names[0], h, name_of) == 0);
  CHECK(index.find(names[1], h, name_of) == 1);
  CHECK(index.find("layers.0.wv", h, name_of) == IdIndex::kNone);
}

TEST_CASE("HashAhead: take(i) is the index's hash of name i; it asks for names 0 .. count - 1 only, each once") {
  // It hashes kAhead (8) names ahead of the probes: with fewer names than
  // that, or at the end of a run, a name past the last is not the caller's
  // to give (deduplicate()'s name_at indexes a partition's tensors).
  using wdedup::detail::HashAhead;
  using wdedup::detail::IdIndex;
  const IdIndex index(0);
  for (const std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{9},
                                  std::size_t{20}}) {
    CAPTURE(count);
    std::vector<std::string> names;
    for (std::size_t j = 0; j < count; ++j) names.push_back("w." + std::to_string(j));
    std::vector<std::size_t> asked;
    auto name_at = [&](std::size_t j) {
      asked.push_back(j);
      return j < count ? std::string_view(names[j]) : std::string_view("past the end");
    };
    HashAhead<decltype(name_at)> ahead(count, name_at, index);
    std::size_t same = 0;
    for (std::size_t i = 0; i < count; ++i) same += ahead.take(i) == index.hash(names[i]);
    CHECK(same == count);
    CHECK(asked.size() == count);
    std::size_t in_order = 0;
    for (std::size_t j = 0; j < asked.size(); ++j) in_order += asked[j] == j;
    CHECK(in_order == count);
  }
}

#if defined(__cpp_exceptions)
// Allocations seen by a replaced operator new that throws when armed
// (support/failing_new.hpp): only where exceptions are on.
#include <new>

#include "support/failing_new.hpp"

TEST_CASE("IdIndex: sized for n names, or reserved for them, it takes n inserts without allocating; moved from, 8") {
  // n names need 2n slots, rounded up to a power of two: 100 take 256. An
  // index of 128 grew at the 65th insert. Every operator new is armed to
  // throw while the names go in (support/failing_new.hpp).
  using wdedup::detail::IdIndex;
  std::vector<std::string> names;
  for (std::uint32_t i = 0; i < 101; ++i) names.push_back("layers." + std::to_string(i) + ".weight");
  auto name_of = [&](std::uint32_t id) { return std::string_view(names[id]); };
  const auto inserts_allocate = [&](IdIndex& index, std::uint32_t first, std::uint32_t count) {
    bool threw = false;
    wdedup_test::g_fail_countdown = 0;
    try {
      for (std::uint32_t i = first; i < first + count; ++i) index.insert(names[i], index.hash(names[i]), i, name_of);
    } catch (const std::bad_alloc&) {
      threw = true;
    }
    wdedup_test::g_fail_countdown = -1;
    return threw;
  };
  IdIndex sized(100);
  CHECK_FALSE(inserts_allocate(sized, 0, 100));
  IdIndex reserved(60);  // 128 slots: too few for 100
  reserved.reserve(100, name_of);
  CHECK_FALSE(inserts_allocate(reserved, 0, 100));
  for (const IdIndex* index : {&sized, &reserved}) {
    std::size_t found = 0;
    for (std::uint32_t i = 0; i < 100; ++i) found += index->find(names[i], index->hash(names[i]), name_of) == i;
    CHECK(found == 100);
    CHECK(index->find(names[100], index->hash(names[100]), name_of) == IdIndex::kNone);
  }
  // The ninth name of an index sized for 8 (16 slots) grows it: the check sees an allocation.
  IdIndex small(8);  // 16 slots
  CHECK_FALSE(inserts_allocate(small, 0, 8));
  CHECK(inserts_allocate(small, 8, 1));
  // A moved-from index counts from 0: its first 16 slots take 8 names.
  // One that kept the 100 names it had counted grew at its second insert.
  IdIndex built(std::move(sized));
  IdIndex assigned;
  assigned = std::move(reserved);
  for (IdIndex* from : {&sized, &reserved}) {
    CHECK(from->find(names[0], from->hash(names[0]), name_of) == IdIndex::kNone);
    from->insert(names[0], from->hash(names[0]), 0, name_of);  // (its first slots: an allocation)
    CHECK_FALSE(inserts_allocate(*from, 1, 7));
    std::size_t found = 0;
    for (std::uint32_t i = 0; i < 8; ++i) found += from->find(names[i], from->hash(names[i]), name_of) == i;
    CHECK(found == 8);
  }
  CHECK(built.find(names[99], built.hash(names[99]), name_of) == 99);
  CHECK(assigned.find(names[99], assigned.hash(names[99]), name_of) == 99);
}
#endif  // __cpp_exceptions
