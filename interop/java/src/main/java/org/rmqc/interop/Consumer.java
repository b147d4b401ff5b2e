package org.rmqc.interop;

import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * A push consumer (from the first offset, a fresh group each run) that prints one JSON line per
 * message received: {"event":"recv","body":..,"msgId":..,"broker":..,"queue":..,"offset":..,
 * "storeMs":..,"recvMs":..}. Runs until SIGTERM.
 *
 * Arguments (key=value): namesrv, topic, group.
 */
public final class Consumer {
    public static void main(String[] argv) throws Exception {
        Map<String, String> args = Json.args(argv);
        String topic = args.getOrDefault("topic", "rmqc-interop");
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(
            args.getOrDefault("group", "rmqc-interop-consumer-" + ProcessHandle.current().pid()));
        consumer.setNamesrvAddr(args.get("namesrv"));
        consumer.setInstanceName("consumer-" + ProcessHandle.current().pid());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setPollNameServerInterval(1000);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (messages, context) -> {
            for (MessageExt message : messages) {
                Json.of("recv").put("body", new String(message.getBody(), StandardCharsets.UTF_8))
                    .put("msgId", message.getMsgId())
                    .put("broker", message.getBrokerName())
                    .put("queue", message.getQueueId())
                    .put("offset", message.getQueueOffset())
                    .put("storeMs", message.getStoreTimestamp())
                    .put("recvMs", System.currentTimeMillis())
                    .print();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(consumer::shutdown));
        consumer.start();
        Json.of("started").put("topic", topic).put("ms", System.currentTimeMillis()).print();
        Thread.currentThread().join();
    }

    private Consumer() {
    }
}
