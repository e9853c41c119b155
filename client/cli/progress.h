// Progress display and byte counts for the command-line programs (df11, df11ctl).
//
//   Progress progress("compress");            // stderr; a bar when it is a terminal
//   progress.Update("model-00001.safetensors", done_bytes, total_bytes);
//   progress.Done();
//   std::cout << HumanBytes(5452595);          // "5.2 MiB"
#ifndef DF11_CLIENT_CLI_PROGRESS_H_
#define DF11_CLIENT_CLI_PROGRESS_H_

#include <cstdint>
#include <ostream>
#include <string>

namespace df11::cli {

// A progress bar redrawn in place on a terminal; otherwise (logs, pipes) one line per tenth of the
// work. Not thread-safe.
class Progress {
 public:
  // Writes to stderr, as a bar when stderr is a terminal.
  explicit Progress(std::string label);
  // Writes to `out`, which must outlive this object; `terminal` chooses the bar.
  Progress(std::string label, std::ostream& out, bool terminal);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // `done` of `total` bytes; `item` names what is being worked on. A total of 0 counts as done.
  void Update(const std::string& item, uint64_t done, uint64_t total);
  // Ends the bar's line (terminal only). Called by the destructor too.
  void Done();

 private:
  std::string label_;
  std::ostream& out_;
  bool terminal_;
  bool open_ = false;
  int last_permille_ = -1;
};

// 1536 -> "1.5 KiB"; under 1 KiB exact ("512 B"); one decimal up to TiB.
std::string HumanBytes(uint64_t bytes);

}  // namespace df11::cli

#endif  // DF11_CLIENT_CLI_PROGRESS_H_
