package org.rmqc.interop;

import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;

/**
 * Sends messages one at a time (synchronously) and prints one JSON line per send:
 * {"event":"send","seq":..,"result":"ok"|"error","status":..,"msgId":..,"broker":..,"queue":..,
 *  "sendMs":..,"ackMs":..,"error":..}. "ok" means SEND_OK: stored and, with allAckInSyncStateSet,
 * acknowledged by every replica of the SyncStateSet. The body of message `seq` is "rmqc-<seq>".
 *
 * Arguments (key=value): namesrv, topic, count (0: until SIGTERM), intervalMs (between sends),
 * group, timeoutMs (per send), retries (the client's own retries of a failed send).
 */
public final class Producer {
    public static void main(String[] argv) throws Exception {
        Map<String, String> args = Json.args(argv);
        String topic = args.getOrDefault("topic", "rmqc-interop");
        long count = Long.parseLong(args.getOrDefault("count", "0"));
        long intervalMs = Long.parseLong(args.getOrDefault("intervalMs", "20"));
        DefaultMQProducer producer = new DefaultMQProducer(args.getOrDefault("group", "rmqc-interop-producer"));
        producer.setNamesrvAddr(args.get("namesrv"));
        producer.setSendMsgTimeout(Integer.parseInt(args.getOrDefault("timeoutMs", "3000")));
        producer.setRetryTimesWhenSendFailed(Integer.parseInt(args.getOrDefault("retries", "2")));
        producer.setPollNameServerInterval(Integer.parseInt(args.getOrDefault("routePollMs", "1000")));
        producer.setInstanceName("producer-" + ProcessHandle.current().pid());
        producer.start();

        CountDownLatch done = new CountDownLatch(1);
        AtomicBoolean stop = new AtomicBoolean();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stop.set(true);  // SIGTERM: finish the send in flight, print "done", then exit
            try {
                done.await();
            } catch (InterruptedException ignored) {
                Thread.currentThread().interrupt();
            }
        }));
        Json.of("started").put("topic", topic).put("ms", System.currentTimeMillis()).print();
        long ok = 0;
        long failed = 0;
        try {
            for (long seq = 0; (count == 0 || seq < count) && !stop.get(); seq++) {
                Message message = new Message(topic, ("rmqc-" + seq).getBytes(StandardCharsets.UTF_8));
                message.setKeys("rmqc-" + seq);
                long sendMs = System.currentTimeMillis();
                Json line = Json.of("send").put("seq", seq);
                try {
                    SendResult result = producer.send(message);
                    boolean stored = result.getSendStatus() == SendStatus.SEND_OK;
                    line.put("result", stored ? "ok" : "error").put("status", result.getSendStatus().name())
                        .put("msgId", result.getMsgId())
                        .put("broker", result.getMessageQueue().getBrokerName())
                        .put("queue", result.getMessageQueue().getQueueId())
                        .put("offset", result.getQueueOffset());
                    if (stored) {
                        ok++;
                    } else {
                        failed++;
                    }
                } catch (Exception error) {
                    failed++;
                    line.put("result", "error").put("error", error.getClass().getSimpleName() + ": "
                        + String.valueOf(error.getMessage()).split("\n")[0]);
                }
                line.put("sendMs", sendMs).put("ackMs", System.currentTimeMillis()).print();
                if (intervalMs > 0) {
                    Thread.sleep(intervalMs);
                }
            }
        } finally {
            Json.of("done").put("ok", ok).put("failed", failed).put("ms", System.currentTimeMillis()).print();
            producer.shutdown();
            done.countDown();
        }
    }

    private Producer() {
    }
}
