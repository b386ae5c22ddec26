#include "runtime/terminal_output.h"

#include <iostream>
#include <streambuf>

namespace blockscope {

namespace {

// A stream buffer that writes to `target`, escaping control characters on the way. It holds
// no bytes of its own except a 0xC2 lead byte (the start of a C1 control in UTF-8) until the
// next byte says what it begins, so what it writes keeps its order with other writers of the
// same file.
class TerminalSafeBuffer : public std::streambuf {
 public:
  explicit TerminalSafeBuffer(std::streambuf* target) : target_(target) {}
  std::streambuf* target() const { return target_; }

 protected:
  int_type overflow(int_type ch) override {
    if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
    put(static_cast<unsigned char>(traits_type::to_char_type(ch)));
    return ch;
  }
  std::streamsize xsputn(const char* text, std::streamsize count) override {
    for (std::streamsize i = 0; i < count; ++i) put(static_cast<unsigned char>(text[i]));
    return count;
  }
  int sync() override {
    release_lead();
    return target_->pubsync();
  }

 private:
  void write(const char* text) {
    for (; *text != '\0'; ++text) target_->sputc(*text);
  }
  void release_lead() {
    if (lead_) target_->sputc(static_cast<char>(0xC2));
    lead_ = false;
  }
  void put(unsigned char byte) {
    static const char* const kHex = "0123456789abcdef";
    if (lead_) {
      lead_ = false;
      if (byte >= 0x80 && byte <= 0x9F) {  // U+0080..U+009F
        const char escaped[] = {'\\', 'u', '0', '0', kHex[byte >> 4], kHex[byte & 15], '\0'};
        write(escaped);
        return;
      }
      target_->sputc(static_cast<char>(0xC2));
    }
    if (byte == 0xC2) {
      lead_ = true;
      return;
    }
    if ((byte < 0x20 && byte != '\n' && byte != '\t') || byte == 0x7F) {
      const char escaped[] = {'\\', 'x', kHex[byte >> 4], kHex[byte & 15], '\0'};
      write(escaped);
      return;
    }
    target_->sputc(static_cast<char>(byte));
  }

  std::streambuf* target_;
  bool lead_ = false;
};

// The unfiltered standard error buffer, kept when the filter is installed.
std::streambuf* original_stderr_buffer = nullptr;

}  // namespace

void install_terminal_safe_output() {
  if (original_stderr_buffer != nullptr) return;
  original_stderr_buffer = std::cerr.rdbuf();
  // Never destroyed: the streams may be written until the process ends.
  static TerminalSafeBuffer* out = new TerminalSafeBuffer(std::cout.rdbuf());
  static TerminalSafeBuffer* err = new TerminalSafeBuffer(std::cerr.rdbuf());
  std::cout.rdbuf(out);
  std::cerr.rdbuf(err);
}

std::string terminal_safe(const std::string& text) {
  std::string out;
  struct StringBuffer : std::streambuf {
    std::string* text;
    int_type overflow(int_type ch) override {
      if (!traits_type::eq_int_type(ch, traits_type::eof())) text->push_back(traits_type::to_char_type(ch));
      return ch;
    }
  } sink;
  sink.text = &out;
  TerminalSafeBuffer filter(&sink);
  filter.sputn(text.data(), static_cast<std::streamsize>(text.size()));
  filter.pubsync();
  return out;
}

std::ostream& raw_stderr() {
  static std::ostream stream(original_stderr_buffer != nullptr ? original_stderr_buffer : std::cerr.rdbuf());
  return stream;
}

}  // namespace blockscope
