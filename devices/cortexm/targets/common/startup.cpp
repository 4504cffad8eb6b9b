// Start-up for the Cortex-M targets: the reset handler (FPU on where there is one, .data
// copied from flash, .bss zeroed, static constructors run, then firmware_main), default handlers, and
// the first sixteen entries of the vector table. Each chip's HAL adds its own interrupt
// vectors (section .vectors.chip, placed right after these by its linker script).

#include <cstdint>

extern "C" {
extern uint32_t _sidata, _sdata, _edata, _sbss, _ebss, _estack;
extern void (*__init_array_start[])();
extern void (*__init_array_end[])();
/// The chip HAL's entry point (C++ forbids calling main).
void firmware_main();
void Reset_Handler();
void Default_Handler();
void NMI_Handler() __attribute__((weak, alias("Default_Handler")));
void HardFault_Handler() __attribute__((weak, alias("Default_Handler")));
void MemManage_Handler() __attribute__((weak, alias("Default_Handler")));
void BusFault_Handler() __attribute__((weak, alias("Default_Handler")));
void UsageFault_Handler() __attribute__((weak, alias("Default_Handler")));
void SVC_Handler() __attribute__((weak, alias("Default_Handler")));
void PendSV_Handler() __attribute__((weak, alias("Default_Handler")));
void SysTick_Handler() __attribute__((weak, alias("Default_Handler")));
}

void Default_Handler() {
  for (;;) {
  }
}

void Reset_Handler() {
#if defined(__ARM_FP)
  // CP10 and CP11 full access, before any floating-point instruction.
  *reinterpret_cast<volatile uint32_t*>(0xE000ED88) |= 0xFU << 20;
  __asm volatile("dsb\n isb");
#endif
  const uint32_t* src = &_sidata;
  for (uint32_t* dst = &_sdata; dst < &_edata;) *dst++ = *src++;
  for (uint32_t* dst = &_sbss; dst < &_ebss;) *dst++ = 0;
  for (auto** f = __init_array_start; f < __init_array_end; ++f) (*f)();
  firmware_main();
  for (;;) {
  }
}

using Handler = void (*)();
__attribute__((section(".vectors.core"), used)) const Handler kCoreVectors[16] = {
    reinterpret_cast<Handler>(&_estack),
    Reset_Handler,
    NMI_Handler,
    HardFault_Handler,
    MemManage_Handler,
    BusFault_Handler,
    UsageFault_Handler,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    SVC_Handler,
    nullptr,
    nullptr,
    PendSV_Handler,
    SysTick_Handler,
};
