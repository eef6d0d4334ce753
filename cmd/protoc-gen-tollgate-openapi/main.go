// Command protoc-gen-tollgate-openapi is a protoc plugin that writes the
// OpenAPI 3.1.0 document of Tollgate's REST API from the protos: paths and
// parameters from google.api.http and (tollgate.v1.field), prices from
// (tollgate.v1.operation), enum strings from (tollgate.v1.json_value), and
// nullability and required fields from the proto types. It writes
// openapi/tollgate.openapi.json and openapi/openapi.go, which embeds it.
//
// It runs as a local plugin of `buf generate` (see buf.gen.yaml).
package main

import (
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/types/pluginpb"
)

func main() {
	protogen.Options{}.Run(func(gen *protogen.Plugin) error {
		gen.SupportedFeatures = uint64(pluginpb.CodeGeneratorResponse_FEATURE_PROTO3_OPTIONAL)
		return generate(gen)
	})
}
