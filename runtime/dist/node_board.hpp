// A node's heartbeat board (dist/heartbeat.hpp, docs/scaling.md "beats"): a small file in shared
// memory that the ranks of one node map, so that only the node's leader (its lowest rank) talks
// to rank 0's store. Each rank has a slot where it counts its beats and writes where its training
// stands; the leader reads every slot, counts its own beats in the header, and posts rank 0's
// verdict there for the others. Nothing in it blocks: plain atomic loads and stores on a shared
// mapping, which is what lets a rank's heartbeat thread never wait on another process.
//
// The file is named by the join's token (new for every job step: dist/store_join.hpp) and the
// node, in /dev/shm (else $TMPDIR, else /tmp), mode 0600; the leader removes it when its node has
// left. A leader that dies leaves it behind (a few KiB).
// Thread safety: every member from its own thread (or process); each slot has one writer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "dist/progress.hpp"

namespace hpctrain::dist {

class NodeBoard {
 public:
  // The board path for `token` and `node` (a host name) in the usual directory.
  static std::string path_for(const std::string& token, const std::string& node);

  // Opens the board at `path` for `slots` ranks, making it when this rank is the first. Throws
  // rt::Error naming the path when it cannot be made, or when it is not one of ours (another size,
  // not a regular file, a link).
  NodeBoard(std::string path, int slots);
  ~NodeBoard();
  NodeBoard(const NodeBoard&) = delete;
  NodeBoard& operator=(const NodeBoard&) = delete;

  // A member's beat: its counter moves and its progress is `where`.
  void beat(int slot, const progress::Snapshot& where);
  // A member leaving in order (its last progress, finishing).
  void leave(int slot, const progress::Snapshot& where);

  struct SlotView {
    uint64_t beats = 0;  // 0: never beaten
    bool left = false;
    progress::Snapshot where;
  };
  SlotView read(int slot) const;

  // The leader's own beat, which the members watch.
  void leader_beat();
  uint64_t leader_beats() const;

  // The first verdict posted stays (later ones are dropped); the members read it.
  void post_verdict(const std::string& verdict);
  std::optional<std::string> verdict() const;

  // The leader, once its node has left: the name goes (the mappings stay until destroyed).
  void remove();

  const std::string& path() const { return path_; }
  int slots() const { return slots_; }

 private:
  struct Header;
  struct Slot;
  Header* header() const;
  Slot* slot(int i) const;

  std::string path_;
  int slots_ = 0;
  void* map_ = nullptr;
  size_t size_ = 0;
};

}  // namespace hpctrain::dist
