// The seed workloads on Kotlin coroutines and channels: the "kotlin" native reference of
// pytest-concurrency.
//
//     java -jar native.jar WORKLOAD ROUNDS WARMUP key=value ... [server=HOST:PORT]
//
// Same protocol as the Go program (pytest_concurrency/native/go/main.go): JSON lines on stdout,
// {"memory":..} first for spawn, {"round":i,"warmup":b,"ns":N,"result":{..}} per round,
// {"usage":..} around the measured rounds, {"done":true}. The Python side checks the results.
// PYTEST_CONCURRENCY_NATIVE_CORRUPT=1 makes every round corrupt one message, for the tests.

import java.io.File
import java.net.InetSocketAddress
import java.nio.ByteBuffer
import java.nio.channels.AsynchronousSocketChannel
import java.nio.channels.CompletionHandler
import kotlin.coroutines.resume
import kotlin.coroutines.resumeWithException
import kotlin.system.exitProcess
import kotlin.time.Duration.Companion.nanoseconds
import kotlinx.coroutines.*
import kotlinx.coroutines.channels.Channel

const val WARMUP_NS = 2_000_000_000L

val corrupt = System.getenv("PYTEST_CONCURRENCY_NATIVE_CORRUPT") == "1"

fun fail(message: String): Nothing {
    System.err.println(message)
    exitProcess(2)
}

fun emit(line: String) {
    println(line)
    System.out.flush()
}

class Params(private val values: Map<String, String>) {
    operator fun get(key: String): String = values[key] ?: fail("parameter $key is missing")

    fun int(key: String): Int = get(key).toIntOrNull() ?: fail("parameter $key=${get(key)} is not an integer")

    /** capacity 0 is RENDEZVOUS (0), N is N, "none" is UNLIMITED. */
    fun <T> channel(): Channel<T> =
        if (get("capacity") == "none") Channel(Channel.UNLIMITED) else Channel(int("capacity"))
}

fun pair(a: Int, b: Int) = "[$a,$b]"

// -- ring --------------------------------------------------------------------------------------

suspend fun ring(p: Params): String = coroutineScope {
    val n = p.int("n")
    val m = p.int("m")
    val chans = List(n) { p.channel<Int>() }
    val nodes = (0 until n - 1).map { i ->
        launch {
            while (true) {
                val v = chans[i].receive()
                chans[i + 1].send(v)
                if (v == 0) break
            }
        }
    }
    val last = async {
        var received = 0
        var weighted = 0L
        var bad = "null"
        while (true) {
            val v = chans[n - 1].receive()
            if (v != m - 1 - received && bad == "null") bad = pair(received, v)
            received++
            weighted += received.toLong() * v // order-sensitive: the Python side recomputes it
            if (v == 0) break
        }
        """{"received":$received,"weighted":$weighted,"bad":$bad}"""
    }
    for (v in m - 1 downTo 0) chans[0].send(if (corrupt && v == m - 1 && m > 1) v + 1 else v)
    nodes.joinAll()
    last.await()
}

// -- chain -------------------------------------------------------------------------------------

class StrEvent(val seq: Int, val s: String) // shares the template: a String is a reference
class BytesEvent(val seq: Int, val b: ByteArray) // a fresh copy per event

/** One receiver's tally: received, checksum, first bad index (-1: none) and its sequence number. */
class Tally {
    var received = 0
    var checksum = 0L
    var badIndex = -1
    var badSeq = 0

    // The checksum reads a payload as the Python workload does: its length plus the
    // character at seq mod length; the Python side computes the expected sum.
    fun add(seq: Int, weight: Long) {
        if (seq != received && badIndex < 0) {
            badIndex = received
            badSeq = seq
        }
        checksum += weight
        received++
    }

    override fun toString() = "[$received,$checksum,$badIndex,$badSeq]"
}

suspend fun chain(p: Params): String = coroutineScope {
    val workers = p.int("workers")
    val events = p.int("events")
    val size = p.int("size")
    val kind = p["payload"]
    val template = ByteArray(size) { i -> (if (kind == "str") 97 + i % 26 else i % 256).toByte() }
    val shared = String(template, Charsets.ISO_8859_1)
    fun seqOf(w: Int, seq: Int) = if (corrupt && w == 0 && seq == events / 2) seq + 1 else seq
    val receivers = (0 until workers).map { w ->
        when (kind) {
            "int" -> {
                val ch = p.channel<Int>()
                launch { for (seq in 0 until events) ch.send(seqOf(w, seq)); ch.close() }
                async { Tally().apply { for (seq in ch) add(seq, seq.toLong()) } }
            }
            "str" -> {
                val ch = p.channel<StrEvent>()
                launch { for (seq in 0 until events) ch.send(StrEvent(seqOf(w, seq), shared)); ch.close() }
                async {
                    Tally().apply {
                        for (ev in ch) {
                            val s = ev.s
                            add(ev.seq, if (s.isEmpty()) 0L else (s.length + s[ev.seq % s.length].code).toLong())
                        }
                    }
                }
            }
            "bytes" -> {
                val ch = p.channel<BytesEvent>()
                launch { for (seq in 0 until events) ch.send(BytesEvent(seqOf(w, seq), template.copyOf())); ch.close() }
                async {
                    Tally().apply {
                        for (ev in ch) {
                            val b = ev.b
                            add(ev.seq, if (b.isEmpty()) 0L else (b.size + (b[ev.seq % b.size].toInt() and 0xff)).toLong())
                        }
                    }
                }
            }
            else -> fail("chain payload $kind unknown; valid: int, str, bytes")
        }
    }
    """{"receivers":[${receivers.awaitAll().joinToString(",")}]}"""
}

// -- switch ------------------------------------------------------------------------------------

suspend fun switch(p: Params): String = coroutineScope {
    val rounds = p.int("rounds")
    val there = Channel<Int>(Channel.RENDEZVOUS)
    val back = Channel<Int>(Channel.RENDEZVOUS)
    val pong = async {
        var answered = 0
        for (v in there) {
            back.send(if (corrupt && answered == 0) v + 2 else v + 1)
            answered++
        }
        answered
    }
    var bad = "null"
    for (i in 0 until rounds) {
        there.send(i)
        val answer = back.receive()
        if (answer != i + 1 && bad == "null") bad = pair(i, answer)
    }
    there.close() // ends pong
    """{"answered":${pong.await()},"bad":$bad}"""
}

// -- spawn -------------------------------------------------------------------------------------

/** `count` coroutines alive at once; `measure` runs once all of them are parked. */
suspend fun spawnTasks(p: Params, measure: () -> Unit): String = coroutineScope {
    val count = p.int("count")
    val ready = Channel<Int>(Channel.UNLIMITED)
    val release = Channel<Unit>(Channel.UNLIMITED)
    val tasks = List(count) { id ->
        async {
            ready.send(id)
            release.receive()
            if (corrupt && id == 0) 1 else id
        }
    }
    val seen = BooleanArray(count)
    var distinct = 0
    var seenSum = 0L
    repeat(count) {
        val id = ready.receive()
        if (id in 0 until count && !seen[id]) {
            seen[id] = true
            distinct++
            seenSum += id
        }
    }
    measure()
    repeat(count) { release.send(Unit) }
    var wrong = 0
    var first = "null"
    tasks.awaitAll().forEachIndexed { i, r ->
        if (r != i) {
            if (wrong == 0) first = pair(i, r)
            wrong++
        }
    }
    """{"seen":$distinct,"seen_sum":$seenSum,"returned":$count,"wrong":$wrong,"first_wrong":$first}"""
}

fun residentBytes(): Long =
    File("/proc/self/statm").readText().trim().split(" ")[1].toLong() * 4096 // x86-64 Linux pages

fun heapBytes(): Long = Runtime.getRuntime().let { it.totalMemory() - it.freeMemory() }

// -- io ----------------------------------------------------------------------------------------

/** NIO's asynchronous sockets as suspending calls: no thread is blocked while a reply is due. */
suspend fun <T> nio(start: (CompletionHandler<T, Unit>) -> Unit): T = suspendCancellableCoroutine { cont ->
    start(object : CompletionHandler<T, Unit> {
        override fun completed(result: T, attachment: Unit) = cont.resume(result)
        override fun failed(exc: Throwable, attachment: Unit) = cont.resumeWithException(exc)
    })
}

suspend fun request(server: InetSocketAddress, id: Long, latencyUs: Long): Long {
    val conn = AsynchronousSocketChannel.open()
    try {
        nio<Void?> { conn.connect(server, Unit, it) }
        val msg = ByteBuffer.allocate(16).putLong(id).putLong(latencyUs).flip()
        while (msg.hasRemaining()) nio<Int> { conn.write(msg, Unit, it) }
        msg.clear()
        while (msg.hasRemaining()) {
            if (nio<Int> { conn.read(msg, Unit, it) } < 0) fail("the latency server closed the connection early")
        }
        return msg.getLong(0)
    } finally {
        conn.close()
    }
}

suspend fun io(p: Params): String = coroutineScope {
    val tasks = p.int("tasks")
    val latencyNs = (p["latency"].toDoubleOrNull() ?: fail("latency=${p["latency"]} is not a number")) * 1e9
    val tcp = p["transport"] == "tcp"
    val server = if (tcp) p["server"].split(":").let { InetSocketAddress(it[0], it[1].toInt()) } else null
    val jobs = (0 until tasks).map { job ->
        async {
            val start = System.nanoTime()
            var got = if (corrupt && job == 0) 1L else job.toLong()
            if (server != null) got = request(server, got, (latencyNs / 1000).toLong())
            else delay(latencyNs.toLong().nanoseconds)
            "[$got,${System.nanoTime() - start}]"
        }
    }
    """{"replies":[${jobs.awaitAll().joinToString(",")}]}"""
}

// -- rounds ------------------------------------------------------------------------------------

/** getrusage's figures from /proc: the JVM offers no getrusage (CPU times in 100 Hz ticks).
 *  Peak RSS is VmHWM, as the Go and Rust programs report it. */
fun usage() {
    val stat = File("/proc/self/stat").readText().substringAfterLast(") ").split(" ")
    val tickUs = 10_000L
    var voluntary = 0L
    var involuntary = 0L
    File("/proc/self/task").listFiles()?.forEach { task ->
        runCatching { File(task, "status").readLines() }.getOrDefault(emptyList()).forEach { line ->
            if (line.startsWith("voluntary_ctxt_switches:")) voluntary += line.substringAfter(":").trim().toLong()
            if (line.startsWith("nonvoluntary_ctxt_switches:")) involuntary += line.substringAfter(":").trim().toLong()
        }
    }
    val hwm = File("/proc/self/status").readLines().firstOrNull { it.startsWith("VmHWM:") }
        ?.substringAfter(":")?.trim()?.removeSuffix("kB")?.trim() ?: "0"
    emit("""{"usage":{"user_us":${stat[11].toLong() * tickUs},"sys_us":${stat[12].toLong() * tickUs},""" +
        """"nvcsw":$voluntary,"nivcsw":$involuntary,"maxrss_kib":$hwm}}""")
}

fun main(args: Array<String>) {
    if (args.size < 3) fail("usage: java -jar native.jar WORKLOAD ROUNDS WARMUP key=value ...")
    val p = Params(args.drop(3).associate {
        val kv = it.split("=", limit = 2)
        if (kv.size != 2) fail("argument $it is not key=value")
        kv[0] to kv[1]
    })
    val rounds = args[1].toIntOrNull() ?: fail("ROUNDS ${args[1]} is not an integer")
    val warmup = args[2].toIntOrNull() ?: fail("WARMUP ${args[2]} is not an integer")
    val run: suspend (Params) -> String = when (args[0]) {
        "ring" -> ::ring
        "chain" -> ::chain
        "switch" -> ::switch
        "spawn" -> { q -> spawnTasks(q) {} }
        "io" -> ::io
        else -> fail("unknown workload ${args[0]}; valid: ring, chain, switch, spawn, io")
    }
    // Dispatchers.Default: one thread per core, as Go's and tokio's schedulers.
    if (args[0] == "spawn") {
        val rss0 = residentBytes()
        val heap0 = heapBytes()
        var rss = 0L
        var heap = 0L
        runBlocking(Dispatchers.Default) { spawnTasks(p) { rss = residentBytes() - rss0; heap = heapBytes() - heap0 } }
        emit("""{"memory":{"rss_bytes":$rss,"heap_bytes":$heap}}""")
    }
    fun round(i: Int, warm: Boolean) {
        val start = System.nanoTime()
        val result = runBlocking(Dispatchers.Default) { run(p) }
        val ns = System.nanoTime() - start
        emit("""{"round":$i,"warmup":$warm,"ns":$ns,"result":$result}""")
    }
    // The JIT compiles hot code during the first seconds: warm up for WARMUP rounds and at
    // least WARMUP_NS, so that small cases are not timed in the interpreter.
    val warmEnd = System.nanoTime() + WARMUP_NS
    var i = 0
    while (i < warmup || System.nanoTime() < warmEnd) round(i++, true)
    usage()
    repeat(rounds) { round(i++, false) }
    usage()
    emit("""{"done":true}""")
}
