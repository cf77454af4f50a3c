// quadctl's output: tables and flattened messages for people, protobuf JSON for scripts, and
// the endpoint and datagram forms both use.
//
//   if (json) PrintJson(socket); else PrintFlat(socket);
#ifndef QUADSOCK_CLIENTS_QUADCTL_OUTPUT_H_
#define QUADSOCK_CLIENTS_QUADCTL_OUTPUT_H_

#include <string>
#include <vector>

#include "clients/cpp/client.h"
#include "google/protobuf/message.h"
#include "quadsock/v1/socket.pb.h"

namespace quadsock::quadctl {

std::string Json(const google::protobuf::Message& m);

void PrintJson(const google::protobuf::Message& m);

std::string Ep(const v1::Endpoint& e);

std::string StateName(v1::SocketState s);

// A table with columns padded to their widest cell.
void PrintTable(const std::vector<std::string>& header,
                const std::vector<std::vector<std::string>>& rows);

// Every scalar of a message as ("stack.rx_frames", "12") in field order: `stats` and `top`.
void Flatten(const google::protobuf::Message& m, const std::string& prefix,
             std::vector<std::pair<std::string, std::string>>* out);

void PrintFlat(const google::protobuf::Message& m);

// Something received, for people: endpoints, sequence, and the payload with C escapes.
std::string DatagramLine(const v1::Datagram& d, bool hex);

Endpoint ParseEndpointArg(const std::string& text);

}  // namespace quadsock::quadctl

#endif  // QUADSOCK_CLIENTS_QUADCTL_OUTPUT_H_
