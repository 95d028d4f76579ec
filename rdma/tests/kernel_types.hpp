// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The kernel's fixed-width types, for C++ that includes the wire-format
// headers the kernel module uses (they leave the types to the includer).
#pragma once

#include <cstdint>

using u8 = std::uint8_t;
using u16 = std::uint16_t;
using u32 = std::uint32_t;
using u64 = std::uint64_t;
using s32 = std::int32_t;
using __be16 = std::uint16_t;
