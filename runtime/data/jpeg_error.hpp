// libjpeg's errors as exceptions, for every user of libjpeg (the training decoder, data/jpeg.cpp;
// the converter's codec, datasets/jpeg_codec.cpp): one error manager. libjpeg reports through
// callbacks and its error_exit must not return: it formats libjpeg's message into `message` and
// longjmps to `jump`, where the caller's setjmp returns non-zero and the caller throws JpegError
// (data/jpeg.hpp). No C++ object with a destructor may live between that setjmp and the longjmp:
// keep each libjpeg call sequence in a plain function of its own. A warning (corrupt data libjpeg
// would paper over, filling gray) is an error too: a damaged image must neither train as a gray
// patch nor be converted. Nothing is printed.
// Thread safety: one manager per (de)compressor; the callbacks touch only theirs.
#pragma once

#include <csetjmp>
#include <cstddef>
#include <cstdio>

// jpeglib.h needs size_t and FILE declared first: its own block, after them.
#include <jpeglib.h>

namespace hpctrain::data {

struct JpegErrorManager {
  jpeg_error_mgr pub;  // first: libjpeg's cinfo->err points here
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

// Makes `err` the error manager `slot` (a compressor's or decompressor's `err`) points to, with
// the callbacks above, and clears its message.
void install_jpeg_errors(JpegErrorManager& err, jpeg_error_mgr*& slot);

}  // namespace hpctrain::data
