#!/usr/bin/python3
"""A client of the standard gRPC services (health, server reflection) that shares no code with the host: Debian's
grpcio and protobuf runtime, with the message types loaded from a descriptor set of grpc-proto's definitions.

  grpc_std_client.py PROTOSET SOCKET list [v1|v1alpha]       one service name per line
  grpc_std_client.py PROTOSET SOCKET describe METHOD [v1|v1alpha]
        METHOD as package.Service.Method: resolves it over reflection and prints
        "<method> <input type> <output type>", then each input field as "field <name> <number> <type>"
  grpc_std_client.py PROTOSET SOCKET check SERVICE          SERVING, NOT_SERVING, ... or the error code
  grpc_std_client.py PROTOSET SOCKET watch SERVICE COUNT [FILE]
        the first COUNT statuses Watch sends, one per line (also appended to FILE as they come)

Exits non-zero with a message on stderr when something does not hold.
"""
import sys

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory


def message_classes(protoset_path):
    fds = descriptor_pb2.FileDescriptorSet()
    with open(protoset_path, "rb") as f:
        fds.ParseFromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for file_proto in fds.file:
        pool.Add(file_proto)
    factory = message_factory.MessageFactory(pool)

    def cls(name):
        desc = pool.FindMessageTypeByName(name)
        get = getattr(message_factory, "GetMessageClass", None)
        return get(desc) if get else factory.GetPrototype(desc)

    return cls, pool


def reflect(channel, cls, version, requests):
    pkg = "grpc.reflection." + version
    req_cls = cls(pkg + ".ServerReflectionRequest")
    resp_cls = cls(pkg + ".ServerReflectionResponse")
    call = channel.stream_stream("/" + pkg + ".ServerReflection/ServerReflectionInfo",
                                 request_serializer=lambda m: m.SerializeToString(),
                                 response_deserializer=resp_cls.FromString)
    return list(call(iter([req_cls(**r) for r in requests]), timeout=10))


def describe(channel, cls, version, method):
    service, _, name = method.rpartition(".")
    (answer,) = reflect(channel, cls, version, [{"file_containing_symbol": service}])
    if answer.WhichOneof("message_response") != "file_descriptor_response":
        sys.exit("no descriptor for %s: %s" % (service, answer.error_response.error_message))
    files = [descriptor_pb2.FileDescriptorProto.FromString(b)
             for b in answer.file_descriptor_response.file_descriptor_proto]
    # Add them to a pool of their own, imports first, as any reflection client must.
    pool = descriptor_pool.DescriptorPool()
    added = set()
    while len(added) < len(files):
        progress = False
        for f in files:
            if f.name not in added and all(d in added for d in f.dependency):
                pool.Add(f)
                added.add(f.name)
                progress = True
        if not progress:
            sys.exit("the answer lacks imports: have %s" % sorted(f.name for f in files))
    m = pool.FindMethodByName(service + "." + name)
    print(m.full_name, m.input_type.full_name, m.output_type.full_name)
    for field in m.input_type.fields:
        print("field", field.name, field.number, field.type)


def main(argv):
    protoset, socket, command, args = argv[1], argv[2], argv[3], argv[4:]
    cls, pool = message_classes(protoset)
    channel = grpc.insecure_channel("unix://" + socket)
    if command == "list":
        version = args[0] if args else "v1alpha"
        (answer,) = reflect(channel, cls, version, [{"list_services": ""}])
        for s in answer.list_services_response.service:
            print(s.name)
    elif command == "describe":
        describe(channel, cls, args[1] if len(args) > 1 else "v1alpha", args[0])
    elif command in ("check", "watch"):
        req_cls = cls("grpc.health.v1.HealthCheckRequest")
        resp_cls = cls("grpc.health.v1.HealthCheckResponse")
        status_enum = pool.FindEnumTypeByName("grpc.health.v1.HealthCheckResponse.ServingStatus")
        kwargs = dict(request_serializer=lambda m: m.SerializeToString(), response_deserializer=resp_cls.FromString)
        try:
            if command == "check":
                check = channel.unary_unary("/grpc.health.v1.Health/Check", **kwargs)
                print(status_enum.values_by_number[check(req_cls(service=args[0]), timeout=10).status].name)
            else:
                watch = channel.unary_stream("/grpc.health.v1.Health/Watch", **kwargs)
                count = int(args[1])
                for answer in watch(req_cls(service=args[0]), timeout=60):
                    name = status_enum.values_by_number[answer.status].name
                    print(name, flush=True)
                    if len(args) > 2:
                        with open(args[2], "a") as f:
                            f.write(name + "\n")
                    count -= 1
                    if count == 0:
                        break
        except grpc.RpcError as e:
            print(e.code().name)
    else:
        sys.exit("unknown command " + command)


if __name__ == "__main__":
    main(sys.argv)
