// Package grainpb is the generated protobuf code of lazytask.proto (the
// file name is unique in the process-wide protobuf registry: protoactor has
// a grain.proto of its own).
package grainpb

//go:generate ../../scripts/protoc.sh lazytask.proto
