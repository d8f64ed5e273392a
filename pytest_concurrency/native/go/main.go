// The seed workloads on goroutines and channels: the "go" native reference of pytest-concurrency.
//
//	prog WORKLOAD ROUNDS WARMUP key=value ... [server=HOST:PORT]
//
// Runs WARMUP warm-up rounds and ROUNDS measured rounds of one case and prints one JSON object
// per line on stdout: {"memory":{...}} first for spawn (in the fresh process: runtimes keep a
// finished task's stack for the next one, so a later pass would see no growth), then
// {"round":i,"warmup":bool,"ns":N,"result":{...}} per round, {"usage":{...}} before the first
// and after the last measured round (getrusage), then {"done":true}. The program does not judge its results: it reports what it counted and
// the Python side checks it against what it computes itself (pytest_concurrency/native/checks.py).
// PYTEST_CONCURRENCY_NATIVE_CORRUPT=1 makes every round corrupt one message, for the tests.
package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

var (
	out     = bufio.NewWriter(os.Stdout)
	corrupt = os.Getenv("PYTEST_CONCURRENCY_NATIVE_CORRUPT") == "1"
)

func emit(format string, args ...any) {
	fmt.Fprintf(out, format+"\n", args...)
	out.Flush()
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(2)
}

type params map[string]string

func (p params) int(key string) int {
	v, err := strconv.Atoi(p[key])
	if err != nil {
		fail("parameter %s=%q is not an integer", key, p[key])
	}
	return v
}

// capacity: "none" is unbounded. Go has no unbounded channel; callers pass the most items
// that can ever be waiting, so a channel of that capacity never blocks a sender.
func (p params) capacity(unbounded int) int {
	if p["capacity"] == "none" {
		return unbounded
	}
	return p.int("capacity")
}

func (p params) seconds(key string) time.Duration {
	v, err := strconv.ParseFloat(p[key], 64)
	if err != nil {
		fail("parameter %s=%q is not a number", key, p[key])
	}
	return time.Duration(v * 1e9)
}

// -- ring: m messages along n nodes; the last node checks count and order ---------------

func ring(p params) string {
	n, m := p.int("n"), p.int("m")
	chans := make([]chan int, n)
	for i := range chans {
		chans[i] = make(chan int, p.capacity(m))
	}
	var wg sync.WaitGroup
	for i := 0; i < n-1; i++ {
		wg.Add(1)
		go func(in <-chan int, out chan<- int) {
			defer wg.Done()
			for {
				v := <-in
				out <- v
				if v == 0 {
					return
				}
			}
		}(chans[i], chans[i+1])
	}
	done := make(chan string, 1)
	go func(in <-chan int) {
		received, weighted, bad := 0, 0, "null"
		for {
			v := <-in
			if want := m - 1 - received; v != want && bad == "null" {
				bad = fmt.Sprintf("[%d,%d]", received, v)
			}
			received++
			weighted += received * v // order-sensitive: the Python side recomputes it
			if v == 0 {
				done <- fmt.Sprintf(`{"received":%d,"weighted":%d,"bad":%s}`, received, weighted, bad)
				return
			}
		}
	}(chans[n-1])
	for v := m - 1; v >= 0; v-- {
		if corrupt && v == m-1 && m > 1 {
			chans[0] <- v + 1
			continue
		}
		chans[0] <- v
	}
	wg.Wait()
	return <-done
}

// -- chain: N senders -> N receivers, one bounded channel per pair -----------------------

type strEvent struct {
	seq int
	s   string // shares the template's bytes: a Go string is a pointer and a length
}

type bytesEvent struct {
	seq int
	b   []byte // a fresh copy per event
}

func chain(p params) string {
	workers, events, size := p.int("workers"), p.int("events"), p.int("size")
	capacity := p.capacity(events)
	template := make([]byte, size)
	for i := range template {
		template[i] = byte(i % 256)
	}
	if p["payload"] == "str" {
		for i := range template {
			template[i] = byte(97 + i%26)
		}
	}
	shared := string(template)
	results := make([]string, workers)
	var receivers, senders sync.WaitGroup
	// The checksum reads each payload as the Python workload's does: its length plus the
	// character at seq mod length; the Python side computes the expected sum.
	report := func(w, received, checksum, badIndex, badSeq int) {
		results[w] = fmt.Sprintf("[%d,%d,%d,%d]", received, checksum, badIndex, badSeq)
	}
	corruptSeq := func(w, seq int) int {
		if corrupt && w == 0 && seq == events/2 {
			return seq + 1
		}
		return seq
	}
	for w := 0; w < workers; w++ {
		receivers.Add(1)
		senders.Add(1)
		switch p["payload"] {
		case "int":
			ch := make(chan int, capacity)
			go func(w int) {
				defer receivers.Done()
				received, checksum, badIndex, badSeq := 0, 0, -1, 0
				for seq := range ch {
					if seq != received && badIndex < 0 {
						badIndex, badSeq = received, seq
					}
					checksum += seq
					received++
				}
				report(w, received, checksum, badIndex, badSeq)
			}(w)
			go func(w int) {
				defer senders.Done()
				for seq := 0; seq < events; seq++ {
					ch <- corruptSeq(w, seq)
				}
				close(ch)
			}(w)
		case "str":
			ch := make(chan strEvent, capacity)
			go func(w int) {
				defer receivers.Done()
				received, checksum, badIndex, badSeq := 0, 0, -1, 0
				for ev := range ch {
					if ev.seq != received && badIndex < 0 {
						badIndex, badSeq = received, ev.seq
					}
					if len(ev.s) > 0 {
						checksum += len(ev.s) + int(ev.s[ev.seq%len(ev.s)])
					}
					received++
				}
				report(w, received, checksum, badIndex, badSeq)
			}(w)
			go func(w int) {
				defer senders.Done()
				for seq := 0; seq < events; seq++ {
					ch <- strEvent{corruptSeq(w, seq), shared}
				}
				close(ch)
			}(w)
		case "bytes":
			ch := make(chan bytesEvent, capacity)
			go func(w int) {
				defer receivers.Done()
				received, checksum, badIndex, badSeq := 0, 0, -1, 0
				for ev := range ch {
					if ev.seq != received && badIndex < 0 {
						badIndex, badSeq = received, ev.seq
					}
					if len(ev.b) > 0 {
						checksum += len(ev.b) + int(ev.b[ev.seq%len(ev.b)])
					}
					received++
				}
				report(w, received, checksum, badIndex, badSeq)
			}(w)
			go func(w int) {
				defer senders.Done()
				for seq := 0; seq < events; seq++ {
					b := make([]byte, len(template))
					copy(b, template)
					ch <- bytesEvent{corruptSeq(w, seq), b}
				}
				close(ch)
			}(w)
		default:
			fail("chain payload %q unknown; valid: int, str, bytes", p["payload"])
		}
	}
	senders.Wait()
	receivers.Wait()
	return `{"receivers":[` + strings.Join(results, ",") + `]}`
}

// -- switch: ping-pong over two unbuffered channels ---------------------------------------

func pingPong(p params) string {
	rounds := p.int("rounds")
	there, back := make(chan int), make(chan int)
	answered := make(chan int, 1)
	go func() {
		count := 0
		for v := range there {
			if corrupt && count == 0 {
				v++
			}
			back <- v + 1
			count++
		}
		answered <- count
	}()
	bad := "null"
	for i := 0; i < rounds; i++ {
		there <- i
		if answer := <-back; answer != i+1 && bad == "null" {
			bad = fmt.Sprintf("[%d,%d]", i, answer)
		}
	}
	close(there)
	return fmt.Sprintf(`{"answered":%d,"bad":%s}`, <-answered, bad)
}

// -- spawn: count goroutines alive at once, each returning its own id ---------------------

// spawn returns the result, and calls measure (if given) once every goroutine is parked.
func spawn(p params, measure func()) string {
	count := p.int("count")
	ready := make(chan int, count) // as many as can ever wait: never blocks (unbounded)
	release := make(chan struct{}, count)
	results := make([]int, count)
	var wg sync.WaitGroup
	for i := 0; i < count; i++ {
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			ready <- id
			<-release
			returned := id
			if corrupt && id == 0 {
				returned = 1
			}
			results[id] = returned // the task's own slot: a join that hands back its result
		}(i)
	}
	seen := make([]bool, count)
	distinct, seenSum := 0, 0
	for i := 0; i < count; i++ {
		id := <-ready
		if id >= 0 && id < count && !seen[id] {
			seen[id] = true
			distinct++
			seenSum += id
		}
	}
	if measure != nil {
		measure()
	}
	for i := 0; i < count; i++ {
		release <- struct{}{}
	}
	wg.Wait()
	wrong, first := 0, "null"
	for i, r := range results {
		if r != i {
			if wrong == 0 {
				first = fmt.Sprintf("[%d,%d]", i, r)
			}
			wrong++
		}
	}
	return fmt.Sprintf(`{"seen":%d,"seen_sum":%d,"returned":%d,"wrong":%d,"first_wrong":%s}`,
		distinct, seenSum, len(results), wrong, first)
}

func residentBytes() int64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(data))
	pages, _ := strconv.ParseInt(fields[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// goHeap: memory the Go runtime holds for stacks and live heap objects; goroutine stacks
// reuse memory freed by earlier rounds, which RSS does not show growing.
func goHeap() int64 {
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	return int64(s.StackInuse + s.HeapAlloc)
}

func spawnMemory(p params) {
	rss0, heap0 := residentBytes(), goHeap()
	var rss, heap int64
	spawn(p, func() { rss, heap = residentBytes()-rss0, goHeap()-heap0 })
	emit(`{"memory":{"rss_bytes":%d,"heap_bytes":%d}}`, rss, heap)
}

// -- io: one goroutine per task, over a timer or the loopback latency server --------------

func ioFanOut(p params) string {
	tasks, latency := p.int("tasks"), p.seconds("latency")
	replies := make([]string, tasks)
	var wg sync.WaitGroup
	for job := 0; job < tasks; job++ {
		wg.Add(1)
		go func(job int) {
			defer wg.Done()
			start := time.Now()
			got := job
			if corrupt && job == 0 {
				got = 1
			}
			if p["transport"] == "tcp" {
				got = request(p["server"], got, latency)
			} else {
				time.Sleep(latency)
			}
			replies[job] = fmt.Sprintf("[%d,%d]", got, time.Since(start).Nanoseconds())
		}(job)
	}
	wg.Wait()
	return `{"replies":[` + strings.Join(replies, ",") + `]}`
}

// request sends (id, delay in µs) as two big-endian uint64 and returns the id in the reply.
func request(server string, id int, latency time.Duration) int {
	conn, err := net.Dial("tcp", server)
	if err != nil {
		fail("connecting to the latency server %s: %v", server, err)
	}
	defer conn.Close()
	msg := make([]byte, 16)
	binary.BigEndian.PutUint64(msg, uint64(id))
	binary.BigEndian.PutUint64(msg[8:], uint64(latency.Microseconds()))
	if _, err := conn.Write(msg); err != nil {
		fail("writing to the latency server: %v", err)
	}
	if _, err := io.ReadFull(conn, msg); err != nil {
		fail("reading from the latency server: %v", err)
	}
	return int(binary.BigEndian.Uint64(msg))
}

// -- rounds ---------------------------------------------------------------------------------

// peakResidentKiB is VmHWM: getrusage's ru_maxrss keeps the high-water mark of the process
// that forked us (the Python session) across exec.
func peakResidentKiB() int64 {
	data, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(data), "\n") {
		if value, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(value), "kB")), 10, 64)
			return kib
		}
	}
	return 0
}

func usage() {
	var r syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &r)
	emit(`{"usage":{"user_us":%d,"sys_us":%d,"nvcsw":%d,"nivcsw":%d,"maxrss_kib":%d}}`,
		r.Utime.Sec*1e6+int64(r.Utime.Usec), r.Stime.Sec*1e6+int64(r.Stime.Usec), r.Nvcsw, r.Nivcsw, peakResidentKiB())
}

func main() {
	if len(os.Args) < 4 {
		fail("usage: %s WORKLOAD ROUNDS WARMUP key=value ...", os.Args[0])
	}
	p := params{"_rounds": os.Args[2], "_warmup": os.Args[3]}
	for _, arg := range os.Args[4:] {
		key, value, ok := strings.Cut(arg, "=")
		if !ok {
			fail("argument %q is not key=value", arg)
		}
		p[key] = value
	}
	workloads := map[string]func(params) string{
		"ring": ring, "chain": chain, "switch": pingPong, "io": ioFanOut,
		"spawn": func(p params) string { return spawn(p, nil) },
	}
	run, ok := workloads[os.Args[1]]
	if !ok {
		fail("unknown workload %q; valid: ring, chain, switch, spawn, io", os.Args[1])
	}
	rounds, warmup := p.int("_rounds"), p.int("_warmup")
	if os.Args[1] == "spawn" {
		spawnMemory(p)
	}
	for i := 0; i < warmup+rounds; i++ {
		if i == warmup {
			usage()
		}
		start := time.Now()
		result := run(p)
		ns := time.Since(start).Nanoseconds()
		emit(`{"round":%d,"warmup":%t,"ns":%d,"result":%s}`, i, i < warmup, ns, result)
	}
	usage()
	emit(`{"done":true}`)
}
