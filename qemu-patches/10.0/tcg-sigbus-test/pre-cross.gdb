break do_ld_bytes_beN
continue
delete
printf "at breakpoint: pc %#lx, tcg_ram_access_ra %#lx\n", $pc, tcg_ram_access_ra
source tgkill.gdb
continue
