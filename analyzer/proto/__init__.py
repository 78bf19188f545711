"""pprof's profile.proto and the classes protoc generates from it (profile_pb2)."""
