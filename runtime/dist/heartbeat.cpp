#include "dist/heartbeat.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "dist/hang_watchdog.hpp"
#include "dist/node_board.hpp"
#include "spec/spec.hpp"

namespace hpctrain::dist {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

// A node leader's record of its node, for rank 0 (node_record()).
std::string node_key(int leader) { return "hb/node/" + std::to_string(leader); }
// Rank 0's verdict for the others: a lost rank's, or a hang's (encode_hang_verdict()).
const std::string kVerdictKey = "hb/verdict";

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

milliseconds since(Clock::time_point t, Clock::time_point now) {
  return std::chrono::duration_cast<milliseconds>(now - t);
}

// One rank as its node's leader last saw it.
struct Member {
  int rank = 0;
  milliseconds age{0};  // since its beat counter last moved, by the leader's clock
  bool left = false;
  std::optional<progress::Snapshot> where;
};

// "SEQ\nRANK AGE_MS LEFT PROGRESS\n...": the sequence number moves every beat, so the value
// changes whenever the leader is alive; PROGRESS is progress::encode()'s, or "-".
std::string node_record(uint64_t seq, const std::vector<Member>& members) {
  std::ostringstream out;
  out << seq << '\n';
  for (const Member& m : members) {
    out << m.rank << ' ' << m.age.count() << ' ' << (m.left ? 1 : 0) << ' '
        << (m.where ? progress::encode(*m.where) : std::string("-")) << '\n';
  }
  return out.str();
}

// nullopt for a record that is not one (garbled): the node counts as unheard.
std::optional<std::vector<Member>> parse_node_record(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  std::vector<Member> members;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::istringstream fields(line);
    Member m;
    int64_t age = 0;
    int left = 0;
    if (!(fields >> m.rank >> age >> left)) return std::nullopt;
    m.age = milliseconds(age);
    m.left = left != 0;
    std::string rest;
    std::getline(fields, rest);
    if (!rest.empty() && rest.front() == ' ') rest.erase(0, 1);
    if (rest != "-") m.where = progress::parse(rest);
    members.push_back(std::move(m));
  }
  return members;
}

}  // namespace

std::vector<std::vector<int>> heartbeat_nodes(const std::vector<std::string>& hosts, int world_size,
                                              bool grouped) {
  std::vector<std::vector<int>> nodes;
  std::map<std::string, size_t> index;
  for (int r = 0; r < world_size; ++r) {
    const std::string host = static_cast<size_t>(r) < hosts.size() ? hosts[r] : "";
    if (!grouped || host.empty()) {
      nodes.push_back({r});
      continue;
    }
    const auto [it, added] = index.emplace(host, nodes.size());
    if (added) nodes.emplace_back();
    nodes[it->second].push_back(r);
  }
  return nodes;
}

struct Heartbeat::State {
  std::unique_ptr<KvStore> store;
  HeartbeatOptions o;
  milliseconds interval{1000};

  // This rank's node: its ranks ascending (the first leads), this rank's slot among them, and
  // the board they share when there are several.
  std::vector<int> node;
  int slot = 0;
  std::unique_ptr<NodeBoard> board;
  bool leader() const { return slot == 0; }

  // The leader's view of its members' beats (slot order).
  std::vector<uint64_t> member_beats;
  std::vector<Clock::time_point> member_moved;
  uint64_t seq = 0;
  // A member's view of its leader's beats.
  uint64_t leader_beats = 0;
  Clock::time_point leader_moved;

  // Rank 0: every other node's record, read with one multi_get once each exists.
  struct NodeSeen {
    int leader = 0;
    std::string key;
    bool exists = false;
    std::string value;
    Clock::time_point changed;  // rank 0's clock: when its value last changed (or the start)
    std::vector<Member> members;
  };
  std::vector<NodeSeen> others;
  std::vector<int> node_of_rank;  // rank -> index in `others`, -1 for rank 0's own node
  Clock::time_point started;

  // The threads and leaving.
  std::mutex mutex;
  std::condition_variable changed;
  bool stopping = false;         // guarded by mutex: the threads return
  bool leave_requested = false;  // guarded by mutex
  bool left = false;             // guarded by mutex: the beat thread has said goodbye
  int running = 0;               // guarded by mutex: threads not yet returned
  std::atomic<bool> leaving{false};

  // When this rank's store traffic last succeeded (the watch thread's clock; leaders only).
  std::atomic<Clock::rep> last_ok{Clock::now().time_since_epoch().count()};
  std::optional<HangWatchdog> hang;

  const std::string& host_name(int rank) const {
    static const std::string unknown;
    if (!o.hosts || rank < 0 || static_cast<size_t>(rank) >= o.hosts->size()) return unknown;
    return (*o.hosts)[static_cast<size_t>(rank)];
  }
  std::string host(int rank) const {
    const std::string& name = host_name(rank);
    return name.empty() ? "" : " (" + name + ")";
  }

  // Ends this rank (the process, unless on_end says otherwise): the verdict on stderr.
  [[noreturn]] void lost(const std::string& why) const {
    end_rank(o, o.exit_status,
             rt::rank_prefix() + why + "; stopping this rank (exit status " +
                 std::to_string(o.exit_status) + ") so the job can recover\n");
  }

  // Sleeps for `d` unless told to stop (or, for the beat thread, to leave); false when stopping.
  bool pause(milliseconds d, bool wake_to_leave) {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait_for(lock, d,
                     [&] { return stopping || (wake_to_leave && leave_requested && !left); });
    return !stopping;
  }

  void returned() {
    std::lock_guard<std::mutex> lock(mutex);
    --running;
    changed.notify_all();
  }

  // on_end has ended this rank without ending the process (the emulator's ranks are threads):
  // the other thread stops too.
  void ended() {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
    changed.notify_all();
  }

  bool leave_now() {
    std::lock_guard<std::mutex> lock(mutex);
    return leave_requested && !left;
  }

  // The layout, from the hosts: ranks sharing a host share a node (and, with a token, a board).
  // A rank other than 0 needs only its own node's ranks.
  void place() {
    const bool grouped = !o.board_token.empty() && !host_name(o.rank).empty();
    std::vector<std::vector<int>> nodes;
    if (o.rank == 0)
      nodes = heartbeat_nodes(o.hosts ? *o.hosts : std::vector<std::string>{}, o.world_size,
                              !o.board_token.empty());
    if (!grouped) {
      node = {o.rank};
    } else if (o.rank == 0) {
      node = nodes.front();
    } else {
      const std::string& mine = host_name(o.rank);
      for (int r = 0; r < o.world_size; ++r) {
        if (r == o.rank || host_name(r) == mine) node.push_back(r);
      }
    }
    slot = static_cast<int>(std::find(node.begin(), node.end(), o.rank) - node.begin());
    if (node.size() > 1) {
      board = std::make_unique<NodeBoard>(NodeBoard::path_for(o.board_token, host_name(o.rank)),
                                          static_cast<int>(node.size()));
    }
    started = Clock::now();
    member_beats.assign(node.size(), 0);
    member_moved.assign(node.size(), started);
    leader_moved = started;
    if (o.rank != 0) return;
    node_of_rank.assign(static_cast<size_t>(o.world_size), -1);
    for (const auto& n : nodes) {
      if (n.front() == 0) continue;
      for (const int r : n) node_of_rank[static_cast<size_t>(r)] = static_cast<int>(others.size());
      NodeSeen seen;
      seen.leader = n.front();
      seen.key = node_key(n.front());
      seen.changed = started;
      for (const int r : n) seen.members.push_back(Member{r, milliseconds(0), false, std::nullopt});
      others.push_back(std::move(seen));
    }
  }

  // The leader: every member of its node as it stands now (its own slot from its own progress).
  std::vector<Member> read_node(Clock::time_point now, const progress::Snapshot& mine,
                                bool leaving_too) {
    std::vector<Member> members;
    for (size_t i = 0; i < node.size(); ++i) {
      Member m;
      m.rank = node[i];
      if (i == 0) {
        m.where = mine;
        m.left = leaving_too;
      } else {
        const NodeBoard::SlotView v = board->read(static_cast<int>(i));
        if (v.beats != member_beats[i]) {
          member_beats[i] = v.beats;
          member_moved[i] = now;
        }
        m.age = since(member_moved[i], now);
        m.left = v.left;
        if (v.beats > 0) m.where = v.where;
      }
      members.push_back(std::move(m));
    }
    return members;
  }

  // Store traffic (leaders only): the node's record; rank 0's watch over every node's.
  void beat_loop() {
    try {
      while (pause(interval, /*wake_to_leave=*/true)) {
        if (leave_now()) {
          say_goodbye();
          break;
        }
        if (!leader()) {
          member_beat();
          continue;
        }
        lead();
        last_ok.store(Clock::now().time_since_epoch().count());
      }
    } catch (const std::exception& e) {
      if (!leaving.load()) {
        try {
          lost("lost the store on rank 0" + host(0) + " at " + o.store_address + ": " +
               first_line(e.what()));
        } catch (const RankEnded&) {
          ended();
        }
      }
    } catch (const RankEnded&) {
      ended();
    }
    returned();
  }

  // A member: its slot on the board, the leader's verdict, the leader's own beats.
  void member_beat() {
    board->beat(slot, current_progress(o));
    if (const auto v = board->verdict()) read_verdict(*v);
    const auto now = Clock::now();
    const uint64_t beats = board->leader_beats();
    if (beats != leader_beats) {
      leader_beats = beats;
      leader_moved = now;
    } else if (since(leader_moved, now) >= o.timeout && !hang->ending()) {
      lost("no beat from rank " + std::to_string(node.front()) + host(node.front()) +
           ", this node's heartbeat leader, for " + seconds_text(since(leader_moved, now)) +
           " (its process is stopped or gone)");
    }
  }

  // A leader, each beat: its own slot and beat on the board, its node's record in the store (rank
  // 0: the watch instead), and rank 0's verdict.
  void lead() {
    const auto now = Clock::now();
    const progress::Snapshot mine = current_progress(o);
    if (board) {
      board->beat(0, mine);
      board->leader_beat();
    }
    std::vector<Member> members = read_node(now, mine, false);
    if (o.rank == 0) {
      const auto round = Clock::now();
      watch(now, members);
      if (o.on_watch_round) {
        o.on_watch_round(
            std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - round));
      }
      return;
    }
    store->set(node_key(o.rank), node_record(++seq, members));
    if (store->check(kVerdictKey)) {
      const std::string v = store->get(kVerdictKey);
      if (board) board->post_verdict(v);
      read_verdict(v);
    }
  }

  // Rank 0: every node's record (one multi_get); a rank silent for the timeout that has not left
  // is lost; then the hang watch over everyone's progress. Either verdict is posted for the
  // others, who read it on their next beat (through their leader), while this process, which
  // serves the store, stays a moment.
  void watch(Clock::time_point now, const std::vector<Member>& own) {
    std::vector<size_t> asked;
    std::vector<std::string> keys;
    for (size_t i = 0; i < others.size(); ++i) {
      // A record is looked for alone until it exists (multi_get would wait for a missing key).
      if (!others[i].exists) others[i].exists = store->check(others[i].key);
      if (others[i].exists) {
        asked.push_back(i);
        keys.push_back(others[i].key);
      }
    }
    const auto values = keys.empty() ? std::vector<std::string>{} : store->multi_get(keys);
    const auto later = Clock::now();  // after the round trip
    for (size_t k = 0; k < asked.size(); ++k) {
      NodeSeen& seen = others[asked[k]];
      if (values[k] == seen.value) continue;
      seen.value = values[k];
      seen.changed = later;
      if (auto members = parse_node_record(values[k])) seen.members = std::move(*members);
    }
    std::vector<milliseconds> ages(static_cast<size_t>(o.world_size), milliseconds(0));
    std::vector<std::optional<progress::Snapshot>> where(static_cast<size_t>(o.world_size));
    std::vector<char> gone(static_cast<size_t>(o.world_size), 0);
    for (const Member& m : own) {
      ages[static_cast<size_t>(m.rank)] = m.age;
      where[static_cast<size_t>(m.rank)] = m.where;
      gone[static_cast<size_t>(m.rank)] = m.left;
    }
    for (const NodeSeen& seen : others) {
      const milliseconds record_age = since(seen.changed, later);
      for (const Member& m : seen.members) {
        if (m.rank <= 0 || m.rank >= o.world_size) continue;
        ages[static_cast<size_t>(m.rank)] = record_age + m.age;
        where[static_cast<size_t>(m.rank)] = m.where;
        gone[static_cast<size_t>(m.rank)] = m.left;
      }
    }
    // A node whose record stopped is its leader's silence (its members' ages in it only grow
    // with it): the leader is named; otherwise the ranks the leaders report silent.
    for (const NodeSeen& seen : others) {
      const size_t leader = static_cast<size_t>(seen.leader);
      if (!gone[leader] && since(seen.changed, later) >= o.timeout) {
        ages[leader] = std::max(ages[leader], since(seen.changed, later));
        post_and_end(lost_verdict(seen.leader, ages, where));
      }
    }
    for (int r = 1; r < o.world_size; ++r) {
      if (gone[static_cast<size_t>(r)] || ages[static_cast<size_t>(r)] < o.timeout) continue;
      // A member is named only on its leader's fresh word: with the record late, the leader may
      // be the one silent, which the record's own age decides.
      const int n = node_of_rank[static_cast<size_t>(r)];
      if (n >= 0 && others[static_cast<size_t>(n)].leader != r &&
          beat_state(since(others[static_cast<size_t>(n)].changed, later), interval) !=
              Beat::kOnTime) {
        continue;
      }
      post_and_end(lost_verdict(r, ages, where));
    }
    if (const auto verdict = hang->watch_reported(later, where, ages)) {
      const std::string text = encode_hang_verdict(*verdict);
      store->set(kVerdictKey, text);
      if (board) board->post_verdict(text);
      hang->carry_out(*store, verdict->message, *verdict);
    }
  }

  // "lost rank R (host): no heartbeat for X s, last in PHASE at step S", and when its whole node
  // went quiet with it (its leader's record stopped), how many ranks that is.
  std::string lost_verdict(int r, const std::vector<milliseconds>& ages,
                           const std::vector<std::optional<progress::Snapshot>>& where) const {
    std::string v = "lost rank " + std::to_string(r) + host(r) + ": no heartbeat for " +
                    seconds_text(ages[static_cast<size_t>(r)]);
    if (const auto& w = where[static_cast<size_t>(r)]) {
      v += ", last in " + progress::phase_name(w->phase, w->detail) + " at step " +
           std::to_string(w->step);
    }
    const int n = node_of_rank[static_cast<size_t>(r)];
    if (n >= 0 && others[static_cast<size_t>(n)].members.size() > 1 &&
        others[static_cast<size_t>(n)].leader == r) {
      v += " (its node's heartbeat leader: all " +
           std::to_string(others[static_cast<size_t>(n)].members.size()) +
           " ranks of the node are unheard)";
    }
    return v;
  }

  [[noreturn]] void post_and_end(const std::string& verdict) {
    store->set(kVerdictKey, verdict);
    if (board) board->post_verdict(verdict);
    std::this_thread::sleep_for(interval + interval / 2);
    lost(verdict);
  }

  void read_verdict(const std::string& v) {
    if (const auto hung = decode_hang_verdict(v)) {
      hang->carry_out(*store, "rank 0 reports: " + hung->message, *hung);
    }
    lost("rank 0 reports: " + v);
  }

  // Leaving: a member says so on the board; a leader waits for its members, then posts its
  // node's last record (everyone finishing, left); rank 0, whose process serves the store, first
  // waits until every node has.
  void say_goodbye() {
    progress::Snapshot done = current_progress(o);
    done.phase = progress::Phase::kFinishing;
    if (!leader()) {
      board->leave(slot, done);
    } else {
      const auto deadline = Clock::now() + o.timeout;
      if (board) {
        board->beat(0, done);
        for (size_t i = 1; i < node.size(); ++i) {
          while (!board->read(static_cast<int>(i)).left && Clock::now() < deadline) {
            board->leader_beat();
            std::this_thread::sleep_for(20ms);
          }
        }
      }
      if (o.rank != 0) {
        store->set(node_key(o.rank), node_record(++seq, read_node(Clock::now(), done, true)));
      } else {
        wait_for_every_node(deadline);
      }
      if (board) board->remove();
    }
    std::lock_guard<std::mutex> lock(mutex);
    left = true;
    changed.notify_all();
  }

  // Rank 0: until every node's record says all its ranks left (one multi_get a poll).
  void wait_for_every_node(Clock::time_point deadline) {
    std::vector<std::string> keys;
    for (const NodeSeen& seen : others) keys.push_back(seen.key);
    while (!keys.empty() && Clock::now() < deadline) {
      std::vector<std::string> waiting;
      for (const std::string& key : keys) {
        if (!store->check(key)) waiting.push_back(key);
      }
      if (waiting.empty()) {
        const auto values = store->multi_get(keys);
        for (size_t i = 0; i < keys.size(); ++i) {
          const auto members = parse_node_record(values[i]);
          const bool all_left = members && std::all_of(members->begin(), members->end(),
                                                       [](const Member& m) { return m.left; });
          if (!all_left) waiting.push_back(keys[i]);
        }
      }
      keys.swap(waiting);
      if (!keys.empty()) std::this_thread::sleep_for(50ms);
    }
  }

  // Leaders, no store traffic: notices when the beats stop succeeding (a round trip that hangs,
  // as on a cut link, never throws).
  void watch_loop() {
    try {
      watch_store();
    } catch (const RankEnded&) {
      ended();
    }
    returned();
  }
  void watch_store() {
    while (pause(interval / 2, /*wake_to_leave=*/false)) {
      if (leaving.load() || hang->ending()) continue;
      const auto last = Clock::time_point(Clock::duration(last_ok.load()));
      const auto silent = since(last, Clock::now());
      if (silent >= o.timeout) {
        lost("no answer from the store on rank 0" + host(0) + " at " + o.store_address + " for " +
             seconds_text(silent) + " (rank 0's node, or this node's link, is gone)");
      }
    }
  }
};

HeartbeatOptions heartbeat_options_from_spec(const spec::Spec& spec) {
  HeartbeatOptions o;
  o.timeout = std::chrono::seconds(spec.resilience.heartbeat_timeout_s);
  o.exit_status = kExitPeerLost;
  o.hang_timeout = std::chrono::seconds(spec.resilience.hang_timeout_s);
  o.checkpoint_timeout = std::chrono::seconds(spec.checkpoint.commit_timeout_s);
  o.hang_exit_status = kExitHang;
  return o;
}

Heartbeat::Heartbeat(std::unique_ptr<KvStore> store, HeartbeatOptions options)
    : state_(std::make_shared<State>()) {
  State& s = *state_;
  s.store = std::move(store);
  s.o = std::move(options);
  // Five beats per timeout, at most one a second.
  s.interval = std::min<milliseconds>(1000ms, s.o.timeout / 5);
  s.hang.emplace(static_cast<const HangOptions&>(s.o), s.o.rank, s.o.world_size, s.o.hosts,
                 s.interval);
  s.store->set_timeout(s.o.timeout);
  s.place();
  if (!s.leader()) {
    s.board->beat(s.slot, current_progress(s.o));
  } else {
    const auto now = Clock::now();
    const progress::Snapshot mine = current_progress(s.o);
    if (s.board) {
      s.board->beat(0, mine);
      s.board->leader_beat();
    }
    if (s.o.rank != 0)
      s.store->set(node_key(s.o.rank), node_record(++s.seq, s.read_node(now, mine, false)));
  }
  // Members have no store traffic to watch: their beat thread watches their leader.
  s.running = s.leader() ? 2 : 1;
  // The threads hold the state: if one is stuck in a store call when this object goes, it is
  // left behind rather than waited for.
  std::thread([s = state_] { s->beat_loop(); }).detach();
  if (s.leader()) std::thread([s = state_] { s->watch_loop(); }).detach();
}

void Heartbeat::leave() {
  state_->leaving.store(true);
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->leave_requested = true;
  state_->changed.notify_all();
  state_->changed.wait_for(lock, state_->o.timeout + 2s, [&] { return state_->left; });
}

Heartbeat::~Heartbeat() {
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->stopping = true;
  state_->changed.notify_all();
  state_->changed.wait_for(lock, 2s, [&] { return state_->running == 0; });
}

}  // namespace hpctrain::dist
