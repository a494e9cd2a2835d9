// horovodrun's --output-filename DIR: every rank's stdout and stderr also copied to
// DIR/rank.<R>/stdout and DIR/rank.<R>/stderr on the launching machine, as horovodrun writes
// them: <R> zero-padded to the digits of the job's last rank, each line (cut at \n or \r, the
// terminator kept) after "[<R>]<stdout>:" or "[<R>]<stderr>:", and after the local time with
// --prefix-output-with-timestamp. Where horovodrun truncates a rank's files each time its worker
// starts again (an elastic round), dtrain truncates them once per job and appends after, so a
// restart never loses what an earlier attempt wrote. The rank logs are kept as always.
#pragma once

#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "launcher/rank_output_copy.h"
#include "launcher/transport.h"

namespace dtrain {

class HorovodrunOutputFiles : public RankOutputCopy {
 public:
  // `dir` absolute; `world_size` sets the padding of the rank folders' names, as horovodrun's
  // -np does; `timestamps`: --prefix-output-with-timestamp. Throws Error when `dir` cannot be
  // made.
  HorovodrunOutputFiles(std::string dir, int world_size, bool timestamps);
  ~HorovodrunOutputFiles() override;
  HorovodrunOutputFiles(const HorovodrunOutputFiles&) = delete;
  HorovodrunOutputFiles& operator=(const HorovodrunOutputFiles&) = delete;

  void Output(int rank, OutputStream stream, std::string_view bytes) override;
  // The rank ended: its unterminated last piece, if any, is written (its files made if it wrote
  // nothing, as horovodrun makes them when the worker starts).
  void Finish(int rank) override;
  std::string PathOf(int rank, OutputStream stream) const override;

  // "rank.07" for rank 7 of 12 ranks: horovodrun's _pad_rank.
  static std::string RankFolder(int rank, int world_size);

 private:
  struct Stream {
    std::FILE* file = nullptr;
    std::string partial;  // the current line so far
    bool failed = false;  // it could not be opened (said once)
  };
  // The stream's file, opened on first use; null when it cannot be (a warning says so once, and
  // the job goes on).
  Stream* Open(int rank, OutputStream stream);
  void Write(int rank, OutputStream stream, Stream& to, std::string_view piece);

  std::string dir_;
  int world_size_;
  bool timestamps_;
  std::map<std::pair<int, OutputStream>, Stream> streams_;
};

}  // namespace dtrain
