// RankReport's byte encoding and its gather to rank 0. Numbers are copied byte for byte
// (memcpy), so doubles round-trip exactly, -0.0 included; both ends are the same binary on
// the same kind of node, so no byte-order conversion is needed.
#include "harness/report.hpp"

#include <cstring>
#include <type_traits>

#include "core/comm/mpi/watchdog.hpp"
#include "core/error.hpp"

namespace pts {
namespace {

class Writer {
 public:
  template <class T>
  void put(const T& v) {
    static_assert(std::is_arithmetic_v<T>);
    out_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void put(const std::string& s) {
    put(uint64_t(s.size()));
    out_.append(s);
  }
  void put(CommOp op) { put(int32_t(op)); }
  void put(Verdict v) { put(int32_t(v)); }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(const std::string& in) : in_(in) {}
  template <class T>
  T get() {
    static_assert(std::is_arithmetic_v<T>);
    T v;
    std::memcpy(&v, take(sizeof v), sizeof v);
    return v;
  }
  std::string get_string() {
    uint64_t n = get<uint64_t>();
    return std::string(take(n), n);
  }
  uint64_t get_count() { return get<uint64_t>(); }
  CommOp get_op() { return static_cast<CommOp>(get<int32_t>()); }
  Verdict get_verdict() { return static_cast<Verdict>(get<int32_t>()); }
  bool done() const { return pos_ == in_.size(); }

 private:
  const char* take(uint64_t n) {
    if (n > in_.size() - pos_) throw Error("rank report truncated: needs " + std::to_string(n) + " bytes at offset " +
                                           std::to_string(pos_) + " of " + std::to_string(in_.size()));
    const char* p = in_.data() + pos_;
    pos_ += n;
    return p;
  }
  const std::string& in_;
  size_t pos_ = 0;
};

void put(Writer& w, const RankCheck& c) {
  w.put(c.verdict);
  w.put(c.reason);
}
RankCheck get_check(Reader& r) {
  RankCheck c;
  c.verdict = r.get_verdict();
  c.reason = r.get_string();
  return c;
}

}  // namespace

// Field order here and in decode_report is the format; change both together.
std::string encode(const RankReport& r) {
  Writer w;
  w.put(int32_t(r.rank));
  w.put(r.error);
  for (int64_t p : r.peak) w.put(p);
  w.put(r.peak_total);
  w.put(r.rss);
  w.put(r.device_used);
  w.put(int32_t(r.stage));
  w.put(r.bubble_theory);
  w.put(r.busy_median);
  w.put(r.wait_median);
  w.put(uint64_t(r.comm.size()));
  for (const CountedOp& o : r.comm) {
    w.put(o.axis);
    w.put(o.op);
    w.put(o.calls);
    w.put(o.payload_bytes);
    w.put(o.bus_bytes);
    w.put(o.wait_s);
    w.put(o.model_s);
  }
  w.put(r.counted_bus);
  w.put(uint8_t(r.expected.has_value()));
  if (const auto& e = r.expected) {
    w.put(e->param);
    w.put(e->grad);
    w.put(e->optimizer);
    w.put(uint8_t(e->activation.has_value()));
    if (e->activation) w.put(*e->activation);
    w.put(uint64_t(e->comm.size()));
    for (const StatedOp& o : e->comm) {
      w.put(o.axis);
      w.put(o.op);
      w.put(o.calls);
      w.put(o.payload_bytes);
    }
    w.put(e->bus_per_step);
    put(w, e->check_comm);
    put(w, e->check_memory);
  }
  const UpdateTrace& t = r.trace;
  w.put(int32_t(t.bound));
  w.put(uint64_t(t.pushed.size()));
  for (const PushedUpdate& p : t.pushed) w.put(int32_t(p.worker)), w.put(int32_t(p.server)), w.put(int32_t(p.step));
  w.put(uint64_t(t.served.size()));
  for (const ServedPull& p : t.served) {
    w.put(int32_t(p.server)), w.put(int32_t(p.worker)), w.put(int32_t(p.step));
    w.put(p.version), w.put(int32_t(p.fewest));
  }
  w.put(uint64_t(t.applied.size()));
  for (const AppliedUpdate& a : t.applied) {
    w.put(int32_t(a.server)), w.put(int32_t(a.worker)), w.put(int32_t(a.step));
    w.put(a.computed_on), w.put(a.applied_to), w.put(int32_t(a.staleness));
  }
  return w.take();
}

RankReport decode_report(const std::string& bytes) {
  Reader rd(bytes);
  RankReport r;
  r.rank = rd.get<int32_t>();
  r.error = rd.get_string();
  for (int64_t& p : r.peak) p = rd.get<int64_t>();
  r.peak_total = rd.get<int64_t>();
  r.rss = rd.get<int64_t>();
  r.device_used = rd.get<int64_t>();
  r.stage = rd.get<int32_t>();
  r.bubble_theory = rd.get<double>();
  r.busy_median = rd.get<double>();
  r.wait_median = rd.get<double>();
  for (uint64_t n = rd.get_count(); n > 0; --n) {
    CountedOp o;
    o.axis = rd.get_string();
    o.op = rd.get_op();
    o.calls = rd.get<uint64_t>();
    o.payload_bytes = rd.get<uint64_t>();
    o.bus_bytes = rd.get<double>();
    o.wait_s = rd.get<double>();
    o.model_s = rd.get<double>();
    r.comm.push_back(std::move(o));
  }
  r.counted_bus = rd.get<double>();
  if (rd.get<uint8_t>()) {
    RankExpectation& e = r.expected.emplace();
    e.param = rd.get<int64_t>();
    e.grad = rd.get<int64_t>();
    e.optimizer = rd.get<int64_t>();
    if (rd.get<uint8_t>()) e.activation = rd.get<int64_t>();
    for (uint64_t n = rd.get_count(); n > 0; --n) {
      StatedOp o;
      o.axis = rd.get_string();
      o.op = rd.get_op();
      o.calls = rd.get<uint64_t>();
      o.payload_bytes = rd.get<uint64_t>();
      e.comm.push_back(std::move(o));
    }
    e.bus_per_step = rd.get<double>();
    e.check_comm = get_check(rd);
    e.check_memory = get_check(rd);
  }
  UpdateTrace& t = r.trace;
  t.bound = rd.get<int32_t>();
  for (uint64_t n = rd.get_count(); n > 0; --n) {
    PushedUpdate& p = t.pushed.emplace_back();
    p.worker = rd.get<int32_t>(), p.server = rd.get<int32_t>(), p.step = rd.get<int32_t>();
  }
  for (uint64_t n = rd.get_count(); n > 0; --n) {
    ServedPull& p = t.served.emplace_back();
    p.server = rd.get<int32_t>(), p.worker = rd.get<int32_t>(), p.step = rd.get<int32_t>();
    p.version = rd.get<int64_t>(), p.fewest = rd.get<int32_t>();
  }
  for (uint64_t n = rd.get_count(); n > 0; --n) {
    AppliedUpdate& a = t.applied.emplace_back();
    a.server = rd.get<int32_t>(), a.worker = rd.get<int32_t>(), a.step = rd.get<int32_t>();
    a.computed_on = rd.get<int64_t>(), a.applied_to = rd.get<int64_t>(), a.staleness = rd.get<int32_t>();
  }
  if (!rd.done()) throw Error("rank report has " + std::to_string(bytes.size()) + " bytes, more than it encodes");
  return r;
}

namespace {

// Gathers one byte string per rank to rank 0 of `side`.
std::vector<std::string> gather_strings(MpiComm& side, const std::string& s) {
  int len = static_cast<int>(s.size());
  std::vector<int> lens(side.size()), offs(side.size());
  MPI_Request req;
  PTS_MPI_CHECK(MPI_Igather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, side.native(), &req));
  watched_wait(&req, "gather (harness)", side.axis(), side.native(), true);
  int total = 0;
  for (int r = 0; r < side.size(); ++r) offs[r] = total, total += lens[r];
  std::string all(side.rank() == 0 ? total : 0, '\0');
  PTS_MPI_CHECK(
      MPI_Igatherv(s.data(), len, MPI_CHAR, all.data(), lens.data(), offs.data(), MPI_CHAR, 0, side.native(), &req));
  watched_wait(&req, "gather (harness)", side.axis(), side.native(), true);
  std::vector<std::string> out;
  if (side.rank() == 0)
    for (int r = 0; r < side.size(); ++r) out.push_back(all.substr(offs[r], lens[r]));
  return out;
}

}  // namespace

std::vector<RankReport> gather_reports(MpiComm& side, const RankReport& mine) {
  std::vector<RankReport> out;
  for (const std::string& bytes : gather_strings(side, encode(mine))) out.push_back(decode_report(bytes));
  return out;
}

}  // namespace pts
