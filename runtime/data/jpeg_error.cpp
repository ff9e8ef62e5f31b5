#include <csetjmp>
#include <cstddef>
#include <cstdio>

// jpeglib.h needs size_t and FILE declared first: its own block, after them.
#include <jpeglib.h>

#include "data/jpeg_error.hpp"

namespace hpctrain::data {
namespace {

extern "C" void on_error_exit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// Warnings (level -1: corrupt data libjpeg recovers from) are errors; trace messages
// (level >= 0) are ignored.
extern "C" void on_emit_message(j_common_ptr cinfo, int level) {
  if (level < 0) on_error_exit(cinfo);
}

extern "C" void on_output_message(j_common_ptr) {}

}  // namespace

void install_jpeg_errors(JpegErrorManager& err, jpeg_error_mgr*& slot) {
  slot = jpeg_std_error(&err.pub);
  err.pub.error_exit = on_error_exit;
  err.pub.emit_message = on_emit_message;
  err.pub.output_message = on_output_message;
  err.message[0] = '\0';
}

}  // namespace hpctrain::data
