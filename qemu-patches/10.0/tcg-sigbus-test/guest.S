/* tiny multiboot guest: loops on loads from one page, reports its #MC */
        .set MB_MAGIC, 0x1BADB002
        .set MB_FLAGS, 0
        .text
        .align 4
        .long MB_MAGIC, MB_FLAGS, -(MB_MAGIC + MB_FLAGS)

        .set PAGE, 0x300000

        .code32
        .globl _start
_start:
        mov $stack_top, %esp
        mov %ebx, mbi
        /* IDT: every exception to bad_exc, #MC (18) to mc_handler */
        xor %ecx, %ecx
1:      mov $bad_exc, %eax
        cmp $18, %ecx
        jne 2f
        mov $mc_handler, %eax
2:      mov %ax, idt(,%ecx,8)
        mov %cs, %dx
        mov %dx, idt+2(,%ecx,8)
        movw $0x8e00, idt+4(,%ecx,8)
        shr $16, %eax
        mov %ax, idt+6(,%ecx,8)
        inc %ecx
        cmp $32, %ecx
        jne 1b
        lidt idtr
        mov %cr4, %eax
        or $0x40, %eax          /* CR4.MCE */
        mov %eax, %cr4
        mov $-1, %eax
        mov $-1, %edx
        mov $0x17b, %ecx        /* MCG_CTL */
        wrmsr
        mov $0x424, %ecx        /* MC9_CTL */
        wrmsr
        /* mode: last character of the multiboot command line */
        mov mbi, %ebx
        mov 16(%ebx), %esi
5:      movb (%esi), %al
        inc %esi
        test %al, %al
        jz 6f
        mov %al, mode
        jmp 5b
6:
        mov $s_hello, %esi
        call puts
        mov $l_al, %eax
        call puthex32
        mov $s_cl, %esi
        call puts
        mov $l_cl, %eax
        call puthex32
        mov $s_lk, %esi
        call puts
        mov $l_lk, %eax
        call puthex32
        mov $s_nl, %esi
        call puts
        movb mode, %al
        cmp $'c', %al
        je cross
        cmp $'p', %al
        je poll
        cmp $'l', %al
        je locked
aligned:
l_al:   mov PAGE, %eax
        mov PAGE+8, %eax
        mov PAGE+16, %eax
        mov PAGE+24, %eax
        jmp aligned
locked:
l_lk:   lock incl PAGE+32       /* an atomic helper under MTTCG */
        jmp locked
cross:
l_cl:   mov PAGE+0xffe, %eax    /* crosses into the next page */
        jmp cross
poll:   mov PAGE, %eax
        mov $0x425, %ecx        /* MC9_STATUS */
        rdmsr
        test $0x80000000, %edx
        jz poll
        mov $s_poll, %esi
        call puts
        call dump_bank
        mov $s_nl, %esi
        call puts
        xor %eax, %eax
        xor %edx, %edx
        mov $0x425, %ecx
        wrmsr
        jmp poll

mc_handler:
        pusha
        mov $s_mc, %esi
        call puts
        mov $0x17a, %ecx        /* MCG_STATUS */
        rdmsr
        push %eax
        mov %edx, %eax
        call puthex32
        pop %eax
        call puthex32
        call dump_bank
        mov $s_eip, %esi
        call puts
        mov 32(%esp), %eax
        call puthex32
        mov $s_nl, %esi
        call puts
        xor %eax, %eax
        xor %edx, %edx
        mov $0x425, %ecx
        wrmsr
        mov $0x17a, %ecx
        wrmsr
        popa
        iret

bad_exc:
        mov $s_bad, %esi
        call puts
        cli
3:      hlt
        jmp 3b

/* " st=<MC9_STATUS> addr=<MC9_ADDR>" */
dump_bank:
        mov $s_st, %esi
        call puts
        mov $0x425, %ecx
        rdmsr
        push %eax
        mov %edx, %eax
        call puthex32
        pop %eax
        call puthex32
        mov $s_addr, %esi
        call puts
        mov $0x426, %ecx
        rdmsr
        push %eax
        mov %edx, %eax
        call puthex32
        pop %eax
        call puthex32
        ret

puts:   lodsb
        test %al, %al
        jz 9f
        mov $0x3f8, %dx
        outb %al, %dx
        jmp puts
9:      ret

puthex32:
        push %ecx
        push %edx
        mov $8, %ecx
4:      rol $4, %eax
        push %eax
        and $0xf, %eax
        movb hexdig(%eax), %al
        mov $0x3f8, %dx
        outb %al, %dx
        pop %eax
        loop 4b
        pop %edx
        pop %ecx
        ret

        .data
hexdig: .ascii "0123456789abcdef"
s_hello: .asciz "guest up: aligned load at "
s_cl:   .asciz " crossing load at "
s_lk:   .asciz " locked inc at "
s_nl:   .asciz "\n"
s_mc:   .asciz "MC mcg="
s_st:   .asciz " st="
s_addr: .asciz " addr="
s_eip:  .asciz " eip="
s_poll: .asciz "POLL"
s_bad:  .asciz "BAD EXCEPTION\n"
idtr:   .word 32 * 8 - 1
        .long idt
mbi:    .long 0
mode:   .byte 0
        .bss
        .align 8
idt:    .space 32 * 8
        .space 4096
stack_top:
