python
import ctypes
t = gdb.selected_thread().ptid
print("tgkill(%d, %d, SIGBUS) = %d" % (t[0], t[1], ctypes.CDLL(None).syscall(234, t[0], t[1], 7)))
end
