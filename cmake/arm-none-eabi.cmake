# The Cortex-M firmware images with Debian's gcc-arm-none-eabi (newlib-nano). The target
# (ERGON_FIRMWARE_TARGET, from the preset) picks the core: nrf52840 is a Cortex-M4F with a
# single-precision FPU, samd21 (Arduino MKR1000) a Cortex-M0+ with none, mps2_an386 (Arm's
# MPS2 board as qemu-system-arm emulates it) a Cortex-M4 with the same FPU.
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)
set(CMAKE_C_COMPILER arm-none-eabi-gcc)
set(CMAKE_CXX_COMPILER arm-none-eabi-g++)
set(CMAKE_ASM_COMPILER arm-none-eabi-gcc)
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
# Compiler checks configure a project of their own: pass them the target too.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES ERGON_FIRMWARE_TARGET)

if(ERGON_FIRMWARE_TARGET STREQUAL "nrf52840" OR ERGON_FIRMWARE_TARGET STREQUAL "mps2_an386")
  set(ergon_cpu "-mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16")
elseif(ERGON_FIRMWARE_TARGET STREQUAL "samd21")
  set(ergon_cpu "-mcpu=cortex-m0plus -mthumb")
else()
  message(FATAL_ERROR "ERGON_FIRMWARE_TARGET must be nrf52840, samd21 or mps2_an386")
endif()
set(ergon_fw "${ergon_cpu} -ffunction-sections -fdata-sections -fno-common")
set(CMAKE_C_FLAGS_INIT "${ergon_fw}")
set(CMAKE_CXX_FLAGS_INIT
    "${ergon_fw} -fno-exceptions -fno-rtti -fno-threadsafe-statics -fno-use-cxa-atexit")
set(CMAKE_EXE_LINKER_FLAGS_INIT
    "${ergon_cpu} -nostartfiles --specs=nano.specs --specs=nosys.specs -Wl,--gc-sections")

set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
