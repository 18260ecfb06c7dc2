// Package grainpb is the generated protobuf code of grain.proto.
package grainpb

//go:generate ../../scripts/protoc.sh grain.proto
