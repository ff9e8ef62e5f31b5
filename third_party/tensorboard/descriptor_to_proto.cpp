// Prints each file of a FileDescriptorSet (stdin) as .proto source under OUT_DIR, with
// libprotobuf's own printer (FileDescriptor::DebugString, which emits valid .proto syntax).
//   descriptor_to_proto OUT_DIR < set.pb
#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>

#include <filesystem>
#include <fstream>
#include <iostream>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: descriptor_to_proto OUT_DIR < set.pb\n";
    return 2;
  }
  google::protobuf::FileDescriptorSet set;
  if (!set.ParseFromIstream(&std::cin)) {
    std::cerr << "stdin is not a FileDescriptorSet\n";
    return 1;
  }
  google::protobuf::DescriptorPool pool;
  for (const auto& proto : set.file()) {
    const google::protobuf::FileDescriptor* file = pool.BuildFile(proto);
    if (file == nullptr) {
      std::cerr << "cannot build " << proto.name() << "\n";
      return 1;
    }
    const std::filesystem::path out = std::filesystem::path(argv[1]) / file->name();
    std::filesystem::create_directories(out.parent_path());
    std::ofstream(out) << file->DebugString();
  }
  return 0;
}
