/*
 * lp_perf: a native librdkafka producer and consumer for bench.produce_consume, so that the
 * client is not what limits a throughput figure (Python clients top out near 150 MB/s on
 * their own side).
 *
 *   lp_perf produce BOOTSTRAP TOPIC RECORDS RECORD_BYTES RATE_MB_S [key=value ...]
 *   lp_perf consume BOOTSTRAP TOPIC RECORDS [key=value ...]
 *
 * produce writes RECORDS records of RECORD_BYTES random bytes (one buffer, handed to
 * librdkafka without a copy) to partition 0 (record i to partition i % N with the setting
 * lp.partitions=N, which is lp_perf's own), as fast as it can (RATE_MB_S 0) or paced at
 * RATE_MB_S (1 MB = 10^6 bytes), waits for every delivery report and prints one JSON line:
 * elapsed seconds from the first produce() to the last report, failures, and the latency of
 * each record from produce() to its delivery report (librdkafka's rd_kafka_message_latency)
 * as p50/p99/p999/max in microseconds. consume reads RECORDS records of partition 0 from the
 * beginning (the legacy consumer with a callback: no per-message allocation in the
 * application) and prints the seconds from the first record to the last, the seconds before
 * the first record (start-up: connection, metadata, the first fetch) and the value bytes
 * received. Every key=value is passed to librdkafka's configuration. Exit status 2: bad arguments or configuration; 1: a
 * record failed or the run timed out.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t *latencies;
static int partitions = 1; /* lp.partitions */
static size_t delivered;
static size_t failed;
static char first_error[256];

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *message, void *opaque) {
    (void)rk;
    (void)opaque;
    if (message->err) {
        if (!failed)
            snprintf(first_error, sizeof first_error, "%s", rd_kafka_err2str(message->err));
        failed++;
    } else {
        latencies[delivered] = rd_kafka_message_latency(message);
    }
    delivered++;
}

static int compare_int64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int64_t percentile(const int64_t *sorted, size_t count, double fraction) {
    if (count == 0)
        return -1;
    size_t index = (size_t)(fraction * (double)(count - 1) + 0.5);
    return sorted[index];
}

static rd_kafka_conf_t *configuration(const char *bootstrap, int argc, char **argv) {
    char error[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, error, sizeof error)) {
        fprintf(stderr, "lp_perf: %s\n", error);
        exit(2);
    }
    for (int i = 0; i < argc; i++) {
        char *equals = strchr(argv[i], '=');
        if (equals == NULL) {
            fprintf(stderr, "lp_perf: expected key=value, got %s\n", argv[i]);
            exit(2);
        }
        *equals = '\0';
        if (strcmp(argv[i], "lp.partitions") == 0) {
            partitions = atoi(equals + 1);
            if (partitions < 1) {
                fprintf(stderr, "lp_perf: lp.partitions must be at least 1\n");
                exit(2);
            }
            continue;
        }
        if (rd_kafka_conf_set(conf, argv[i], equals + 1, error, sizeof error)) {
            fprintf(stderr, "lp_perf: %s\n", error);
            exit(2);
        }
    }
    return conf;
}

static int produce(const char *bootstrap, const char *topic, long records, long record_bytes,
                   double rate_mb_s, int argc, char **argv) {
    char error[512];
    rd_kafka_conf_t *conf = configuration(bootstrap, argc, argv);
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, error, sizeof error);
    if (rk == NULL) {
        fprintf(stderr, "lp_perf: %s\n", error);
        return 2;
    }
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    char *value = malloc((size_t)record_bytes);
    latencies = calloc((size_t)records, sizeof *latencies);
    if (value == NULL || latencies == NULL) {
        fprintf(stderr, "lp_perf: out of memory\n");
        return 2;
    }
    unsigned seed = 19;
    for (long i = 0; i < record_bytes; i++)
        value[i] = (char)rand_r(&seed);
    double seconds_per_record = rate_mb_s > 0 ? (double)record_bytes / (rate_mb_s * 1e6) : 0;
    double start = now_seconds();
    for (long i = 0; i < records; i++) {
        if (seconds_per_record > 0) {
            double due = start + (double)i * seconds_per_record;
            double ahead = due - now_seconds();
            if (ahead > 0.0005) {
                struct timespec pause = {0, (long)(ahead * 1e9)};
                nanosleep(&pause, NULL);
            }
            rd_kafka_poll(rk, 0);
        }
        int32_t partition = (int32_t)(i % partitions);
        while (rd_kafka_produce(rkt, partition, 0, value, (size_t)record_bytes, NULL, 0,
                                NULL) == -1) {
            if (rd_kafka_last_error() != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                fprintf(stderr, "lp_perf: produce: %s\n", rd_kafka_err2str(rd_kafka_last_error()));
                return 1;
            }
            rd_kafka_poll(rk, 1);
        }
    }
    double give_up = now_seconds() + 300;
    while (delivered < (size_t)records && now_seconds() < give_up)
        rd_kafka_poll(rk, 100);
    double elapsed = now_seconds() - start;
    size_t ok = delivered - failed;
    qsort(latencies, ok, sizeof *latencies, compare_int64);
    printf("{\"client\": \"librdkafka %s\", \"elapsed_s\": %.6f, \"records\": %ld, "
           "\"delivered\": %zu, \"failed\": %zu, \"latency_us\": {\"p50\": %" PRId64
           ", \"p99\": %" PRId64 ", \"p999\": %" PRId64 ", \"max\": %" PRId64 "}}\n",
           rd_kafka_version_str(), elapsed, records, delivered, failed,
           percentile(latencies, ok, 0.5), percentile(latencies, ok, 0.99),
           percentile(latencies, ok, 0.999), percentile(latencies, ok, 1.0));
    if (failed)
        fprintf(stderr, "lp_perf: %zu records failed, first: %s\n", failed, first_error);
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    return failed || delivered < (size_t)records ? 1 : 0;
}

struct consumed {
    long records;
    long long bytes;
    long errors;
    double first; /* when the first record arrived (0: none yet) */
};

static void on_message(rd_kafka_message_t *message, void *opaque) {
    struct consumed *consumed = opaque;
    if (message->err == RD_KAFKA_RESP_ERR__PARTITION_EOF)
        return;
    if (message->err) {
        if (!consumed->errors)
            snprintf(first_error, sizeof first_error, "%s", rd_kafka_err2str(message->err));
        consumed->errors++;
        return;
    }
    if (consumed->records == 0)
        consumed->first = now_seconds();
    consumed->records++;
    consumed->bytes += (long long)message->len;
}

static int consume(const char *bootstrap, const char *topic, long records, int argc,
                   char **argv) {
    char error[512];
    rd_kafka_conf_t *conf = configuration(bootstrap, argc, argv);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, error, sizeof error);
    if (rk == NULL) {
        fprintf(stderr, "lp_perf: %s\n", error);
        return 2;
    }
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    struct consumed consumed = {0, 0, 0, 0.0};
    double start = now_seconds();
    if (rd_kafka_consume_start(rkt, 0, RD_KAFKA_OFFSET_BEGINNING) == -1) {
        fprintf(stderr, "lp_perf: consume_start: %s\n",
                rd_kafka_err2str(rd_kafka_last_error()));
        return 2;
    }
    double give_up = start + 300;
    while (consumed.records < records && !consumed.errors && now_seconds() < give_up)
        rd_kafka_consume_callback(rkt, 0, 1000, on_message, &consumed);
    double end = now_seconds();
    double first = consumed.first > 0 ? consumed.first : end;
    rd_kafka_consume_stop(rkt, 0);
    /* elapsed: first record to last (the rate); start_s: start to first record (connection,
     * metadata, the first fetch), reported apart as rdkafka_performance does */
    printf("{\"client\": \"librdkafka %s\", \"elapsed_s\": %.6f, \"start_s\": %.6f, "
           "\"records\": %ld, \"bytes\": %lld, \"errors\": %ld}\n",
           rd_kafka_version_str(), end - first, first - start, consumed.records, consumed.bytes,
           consumed.errors);
    if (consumed.errors)
        fprintf(stderr, "lp_perf: consume: %s\n", first_error);
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    return consumed.errors || consumed.records < records ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc >= 7 && strcmp(argv[1], "produce") == 0) {
        char *end;
        long records = strtol(argv[4], &end, 10);
        long record_bytes = strtol(argv[5], &end, 10);
        double rate = strtod(argv[6], &end);
        if (records <= 0 || record_bytes <= 0 || rate < 0) {
            fprintf(stderr, "lp_perf: bad RECORDS, RECORD_BYTES or RATE_MB_S\n");
            return 2;
        }
        return produce(argv[2], argv[3], records, record_bytes, rate, argc - 7, argv + 7);
    }
    if (argc >= 5 && strcmp(argv[1], "consume") == 0) {
        long records = strtol(argv[4], NULL, 10);
        if (records <= 0) {
            fprintf(stderr, "lp_perf: bad RECORDS\n");
            return 2;
        }
        return consume(argv[2], argv[3], records, argc - 5, argv + 5);
    }
    fprintf(stderr,
            "usage: lp_perf produce BOOTSTRAP TOPIC RECORDS RECORD_BYTES RATE_MB_S [k=v ...]\n"
            "       lp_perf consume BOOTSTRAP TOPIC RECORDS [k=v ...]\n");
    return 2;
}
