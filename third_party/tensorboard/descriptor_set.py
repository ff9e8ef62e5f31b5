"""Writes the FileDescriptorSet of TensorBoard's Event message and everything it imports, taken
from the installed tensorboard package's compiled descriptors, to stdout.
  python descriptor_set.py > set.pb"""
import sys

from google.protobuf import descriptor_pb2
from tensorboard.compat.proto import event_pb2

files = descriptor_pb2.FileDescriptorSet()
seen = set()


def add(fd):  # dependencies first, as protoc expects
    if fd.name in seen:
        return
    seen.add(fd.name)
    for dep in fd.dependencies:
        add(dep)
    files.file.add().ParseFromString(fd.serialized_pb)


add(event_pb2.DESCRIPTOR)
sys.stdout.buffer.write(files.SerializeToString())
